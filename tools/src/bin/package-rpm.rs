//! Packs the tree that `packaging/build-rpm.sh` staged (the same tree as
//! the .deb's, from `packaging/stage-tree.sh`) into cpushield's .rpm, with
//! the rpm crate (rpm-rs) instead of rpmbuild and a spec file:
//!
//!   cargo run -p cpushield-tools --bin package-rpm -- STAGE OUTDIR --source-date EPOCH --commit HASH
//!
//! writes OUTDIR/cpushield-VERSION-RELEASE.x86_64.rpm and prints its path.
//! Every regular file under STAGE is packed with its mode, owned by root;
//! man pages and the example config are marked as documentation, the
//! copyright file in /usr/share/licenses/cpushield as the license. Nothing
//! may be under /etc (the package has no `%config` files). The scriptlets
//! are `packaging/rpm/*.sh`, built into this program. With the same tree (timestamps clamped to
//! EPOCH) and the same arguments, two runs write the same bytes.

use std::path::{Path, PathBuf};

use clap::Parser;

/// The package's one-line summary (as the .deb's Description line).
const SUMMARY: &str = "Shield CPUs for real-time work, undo it exactly, prove it";

/// The package's description (as the .deb's long Description).
const DESCRIPTION: &str = "\
cpushield moves every other process, kernel thread, interrupt and unbound
workqueue off chosen CPUs and has the kernel keep them off (a cgroup
cpuset partition), journals every change so \"cpushield off\" restores the
machine exactly, and measures latency shielded and unshielded under load.

The package changes nothing when installed or removed: the shield is
applied by cpushield.service once it is enabled and configured in
/etc/cpushield/cpushield.toml.";

/// The directories that are cpushield's alone, so the package owns them
/// (and an erase removes them). The others (/usr/sbin, the systemd unit
/// directory, the man and shell completion directories) belong to the
/// distribution's filesystem and systemd packages.
const OWNED_DIRS: [&str; 3] = [
    "/usr/share/doc/cpushield",
    "/usr/share/doc/cpushield/examples",
    "/usr/share/licenses/cpushield",
];

/// The license file (the crates linked into the binary and their
/// licenses), at Fedora's %license place.
const LICENSE_FILE: &str = "/usr/share/licenses/cpushield/copyright";

/// Arguments of package-rpm.
#[derive(Parser)]
#[command(about = "Packs a staged cpushield tree into an .rpm")]
struct Args {
    /// The staged tree: its files are installed at the same paths under /.
    stage: PathBuf,
    /// Where the .rpm is written (as NAME-VERSION-RELEASE.ARCH.rpm).
    outdir: PathBuf,
    /// The build time and the files' latest time, in seconds since 1970
    /// (SOURCE_DATE_EPOCH), so that a build is reproducible.
    #[arg(long)]
    source_date: u32,
    /// The commit the package is built from, named in its changelog.
    #[arg(long)]
    commit: String,
    /// The package release.
    #[arg(long, default_value = "1")]
    release: String,
    /// Who built the package, "Name <mail>".
    #[arg(long, default_value = "cpushield maintainers <cpushield@localhost>")]
    packager: String,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let version = env!("CARGO_PKG_VERSION");
    let mut files = Vec::new();
    collect(&args.stage, &args.stage, &mut files)?;
    files.sort();

    let mut pkg = rpm::PackageBuilder::new(
        "cpushield",
        version,
        env!("CARGO_PKG_LICENSE"),
        "x86_64",
        SUMMARY,
    );
    pkg.using_config(
        rpm::BuildConfig::v4()
            .compression(rpm::CompressionType::Gzip)
            .source_date(args.source_date),
    )
    .release(&args.release)
    .description(DESCRIPTION)
    .packager(&args.packager)
    // rpmlint wants a group, though Fedora no longer uses it; this is the
    // traditional one for system tools.
    .group("Applications/System")
    // A constant, not this machine's name, so that the build is
    // reproducible (as rpmbuild's %_buildhost for reproducible builds).
    .build_host("reproducible")
    // Only a suggestion, as in the .deb: `compare` loads the machine with
    // stress-ng when it is installed. The .deb's other suggestion,
    // prometheus-node-exporter, is named differently in each RPM
    // distribution, so it is left out.
    .suggests(rpm::Dependency::any("stress-ng"))
    .add_changelog_entry(
        format!("{} - {version}-{}", args.packager, args.release),
        format!("- Built from commit {}.", args.commit),
        args.source_date,
    )
    // No daemon-reload, preset, start, stop, or restart: see each script.
    .post_install_script(scriptlet(include_str!("../../../packaging/rpm/post.sh")))
    .pre_uninstall_script(scriptlet(include_str!("../../../packaging/rpm/preun.sh")))
    .post_uninstall_script(scriptlet(include_str!("../../../packaging/rpm/postun.sh")));

    // Cargo.toml names no home page yet; once it does, the package does too.
    let urls = [env!("CARGO_PKG_HOMEPAGE"), env!("CARGO_PKG_REPOSITORY")];
    if let Some(url) = urls.into_iter().find(|url| !url.is_empty()) {
        pkg.url(url);
    }
    if !files.iter().any(|(_, dest, _)| dest == LICENSE_FILE) {
        return Err(format!("{LICENSE_FILE} is not in the staged tree").into());
    }
    for dir in OWNED_DIRS {
        pkg.with_dir_entry(rpm::FileOptions::dir(dir).permissions(0o755))?;
    }
    for (source, dest, mode) in &files {
        let mut options = rpm::FileOptions::new(dest.as_str()).permissions(*mode);
        if dest == LICENSE_FILE {
            options = options.license();
        } else if dest.starts_with("/usr/share/man/") || dest.starts_with("/usr/share/doc/") {
            options = options.doc();
        }
        pkg.with_file(source, options)?;
    }

    let written = pkg.build()?.write_to(&args.outdir)?;
    println!("{}", written.display());
    Ok(())
}

/// A shell scriptlet, its interpreter named in the header as rpmbuild
/// names it (`rpm -qp --scripts` shows "using /bin/sh").
fn scriptlet(script: &str) -> rpm::Scriptlet {
    rpm::Scriptlet::new(script).prog(vec!["/bin/sh"])
}

/// Adds every regular file under `dir` to `files` as (source, path
/// installed, permission bits). Anything else but directories, and anything
/// under /etc, is refused: the package ships neither links nor `%config`
/// files, and a new kind of entry needs a decision here first.
fn collect(
    stage: &Path,
    dir: &Path,
    files: &mut Vec<(PathBuf, String, u16)>,
) -> Result<(), Box<dyn std::error::Error>> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let meta = std::fs::symlink_metadata(&path)?;
        let rel = path.strip_prefix(stage)?;
        let dest = format!("/{}", rel.to_str().ok_or("a staged path is not UTF-8")?);
        if meta.is_dir() {
            collect(stage, &path, files)?;
        } else if !meta.is_file() {
            return Err(format!("{dest}: only regular files and directories are packed").into());
        } else if dest.starts_with("/etc/") {
            return Err(format!("{dest}: nothing is shipped under /etc").into());
        } else {
            use std::os::unix::fs::PermissionsExt;
            let mode = u16::try_from(meta.permissions().mode() & 0o7777)?;
            files.push((path, dest, mode));
        }
    }
    Ok(())
}
