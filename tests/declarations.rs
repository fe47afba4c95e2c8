//! Every option a component declares reaches, from its declaration alone,
//! `on --help`, the man page, the config file's documentation (the example
//! file `packaging/cpushield.toml`), the config parser and `verify`'s
//! comparisons. A component whose option lacks one of them fails here.

#[allow(dead_code)]
#[path = "../src/cli.rs"]
mod cli;
#[path = "common/help.rs"]
mod help_texts;

use clap::CommandFactory;
use cpushield::shield::options::flags;
use cpushield::shield::Options;

const EXAMPLE: &str = "packaging/cpushield.toml";
const BEGIN: &str = "# --- of \"cpushield on\"; regenerate with CPUSHIELD_BLESS=1 cargo test --test declarations)\n";
const END: &str = "# --- end of the components' keys\n";

fn on_command() -> clap::Command {
    let mut cmd = cli::Cli::command();
    cmd.build();
    cmd.find_subcommand("on").expect("an on command").clone()
}

#[test]
fn every_option_has_its_help_and_man_page_and_a_flag_of_on() {
    let on = on_command();
    let mut page = Vec::new();
    clap_mangen::Man::new(on.clone()).render(&mut page).unwrap();
    let page = String::from_utf8(page).unwrap();
    let declared = flags::<Options>();
    assert!(declared.len() >= 13, "{} options", declared.len());
    for arg in &declared {
        let long = arg.get_long().expect("every option has a long flag");
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string());
        assert!(
            help.as_deref().is_some_and(|h| h.len() > 20),
            "--{long} has no help"
        );
        let flag = on.get_arguments().find(|a| a.get_long() == Some(long));
        assert!(flag.is_some(), "--{long} is not a flag of on");
        // The man page escapes dashes.
        let in_page = long.replace('-', "\\-");
        assert!(page.contains(&in_page), "--{long} is not in the man page");
    }
}

#[test]
fn every_option_is_documented_in_the_config_example_as_its_declaration_says() {
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let doc = cpushield::config::components_documentation();
    let (Some(begin), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        panic!("{EXAMPLE} has lost its markers of the components' keys");
    };
    let written = &text[begin + BEGIN.len()..end];
    if written.trim() != doc.trim() {
        if std::env::var_os("CPUSHIELD_BLESS").is_some() {
            let new = format!("{}{doc}{}", &text[..begin + BEGIN.len()], &text[end..]);
            std::fs::write(EXAMPLE, new).unwrap();
        } else {
            panic!(
                "{EXAMPLE} does not document the components' keys as they are declared; \
                 regenerate it with CPUSHIELD_BLESS=1 cargo test --test declarations\n{doc}"
            );
        }
    }
    for arg in flags::<Options>() {
        let key = arg.get_id().as_str();
        assert!(
            Options::examples().iter().any(|(k, _)| *k == key),
            "{key} has no example value"
        );
        assert!(
            doc.lines().any(|l| l.starts_with(&format!("#{key} = "))),
            "{key} is not in the documentation"
        );
    }
}

#[test]
fn every_documented_example_parses_and_verify_compares_every_option() {
    // The example file with every key uncommented is a valid config...
    let uncommented: String = std::fs::read_to_string(EXAMPLE)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .filter(|l| {
            l.starts_with('[') || l.split_once(" = ").is_some_and(|(k, _)| !k.contains(' '))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let path = std::path::Path::new("example");
    let (request, certify) = cpushield::config::parse_with_certify(&uncommented, path).unwrap();
    assert_eq!(request.cpus.to_string(), "2-3");
    assert!(request.boot.is_some() && certify.budget.is_some());
    // The file's own keys are documented beside the components'.
    for own in ["cpus", "force", "allow_split_siblings", "boot"] {
        let line = format!("{own} = ");
        assert!(uncommented.lines().any(|l| l.starts_with(&line)), "{own}");
    }
    assert!(uncommented.lines().any(|l| l == "[certify]"));
    let options: Options = request.declared().unwrap();
    // ... whose options differ from the defaults, each compared by verify.
    let compared = options.compared();
    let defaults = Options::default().compared();
    for arg in flags::<Options>() {
        let key = arg.get_id().as_str();
        let now = compared.iter().find(|(k, _)| k == key);
        assert!(now.is_some(), "verify does not compare {key}");
        let was = defaults.iter().find(|(k, _)| k == key);
        // Each example is a value of its own, except where the example is
        // the default (the guard's `auto`).
        if now != was {
            assert_ne!(now.unwrap().1, "none", "{key}");
        }
    }
    // And `on` gets the same request from the words the options give.
    let words = options.words();
    let mut argv = vec!["cpushield".to_string(), "on".into(), "2-3".into()];
    // The words are a shell's: a value double-quoted (`--irq-priority="eth0*:85"`)
    // is its text.
    let unquoted = |w: String| {
        let (flag, value) = w.split_once('=').map_or(("", w.as_str()), |(f, v)| (f, v));
        match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            Some(inner) if !inner.contains(['"', '\\']) && flag.is_empty() => inner.to_string(),
            Some(inner) if !inner.contains(['"', '\\']) => format!("{flag}={inner}"),
            _ => w,
        }
    };
    argv.extend(words.into_iter().map(unquoted));
    let cli = <cli::Cli as clap::Parser>::try_parse_from(&argv).unwrap();
    let Some(cli::Command::On(on)) = cli.command else {
        panic!("not on: {argv:?}")
    };
    assert_eq!(on.options, options, "{argv:?}");
}

/// Every command `cpushield --help` lists has a man page, as the package
/// renders them (tools/src/bin/package-assets.rs: one section 8 page per
/// command, from the same CLI), and each page names every option that
/// command's `--help` lists.
#[test]
fn every_command_has_a_man_page_naming_every_option_of_its_help() {
    let mut cmd = cli::Cli::command();
    cmd.build();
    let mut pages = 0;
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let mut page = Vec::new();
        clap_mangen::Man::new(sub.clone())
            .section("8")
            .render(&mut page)
            .unwrap();
        // roff writes a dash as `\-`.
        let page = String::from_utf8(page).unwrap().replace("\\-", "-");
        let options = help_texts::options(&help_texts::help(&[sub.get_name()]));
        let missing: Vec<&String> = options
            .iter()
            .filter(|o| !page.contains(o.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "the man page of {} lacks {missing:?} of its --help",
            sub.get_name()
        );
        pages += 1;
    }
    assert!(pages >= 18, "{pages} man pages");
}
