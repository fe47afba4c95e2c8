//! Byte-exact edits of the bootloader's files and their inverses.
//!
//! Every file the boot half writes is a [`FileChange`]: its path, what it
//! held before cpushield first wrote it, what cpushield wrote, and the kind
//! of edit. Removal gives back `before` byte for byte while the file is
//! still what cpushield wrote; when something else changed it since (a
//! kernel update rewriting an entry, the user editing a line), only
//! cpushield's own part is cut, as written, and the words it took out go
//! back where its words were; when even that part is gone or changed, the
//! file is refused by name.

use serde::{Deserialize, Serialize};

use super::OWN_KEYS;

/// One file of the boot half.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The file, relative to the root.
    pub path: String,
    /// Its content before cpushield first wrote it (`None`: absent).
    pub before: Option<String>,
    /// What cpushield wrote.
    pub written: String,
    /// How it was edited, for undoing it once the file changed.
    pub edit: Edit,
    /// cpushield made the file's directory (removed again with the file).
    #[serde(default)]
    pub made_dir: bool,
}

/// How a file was edited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Edit {
    /// The whole file is cpushield's (a drop-in, or a file it created).
    Whole,
    /// A block appended at the end of a file of the user's.
    Block {
        /// The block, as written.
        text: String,
    },
    /// Words on one line of a file of the user's: the line that starts
    /// with `key` (the first such; `""`: the first line).
    Words {
        /// The line's key (`options` in a boot entry).
        key: String,
        /// cpushield's words, appended to the line's end.
        added: Vec<String>,
        /// The user's words that set a key of cpushield's, taken out.
        removed: Vec<String>,
    },
}

/// How removal left a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Undone {
    /// Byte-identical to before cpushield first wrote it (or absent again).
    Restored,
    /// Changed by something else since: cpushield's part cut out, the
    /// user's words put back where cpushield's were; the rest kept.
    Cut,
}

/// Whether `word` sets one of cpushield's own keys.
pub fn own_key(word: &str) -> bool {
    OWN_KEYS.contains(&word.split('=').next().unwrap_or_default())
}

/// What a command line (its `words`) lacks of `options`, and each of
/// cpushield's keys it sets more than once, as problems about `place`.
pub fn line_problems(words: &[&str], options: &[String], place: &str) -> Vec<String> {
    let mut out = Vec::new();
    let missing: Vec<&str> = options
        .iter()
        .filter(|o| !words.contains(&o.as_str()))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        out.push(format!("{place} lacks {}", missing.join(" ")));
    }
    for k in OWN_KEYS {
        let n = words
            .iter()
            .filter(|w| w.split('=').next() == Some(k))
            .count();
        if n > 1 {
            out.push(format!("{place} sets {k}= {n} times"));
        }
    }
    out
}

/// The byte range of the line that `key` starts (its first word), or the
/// first line for an empty key; without its newline.
fn line_range(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let hit = if key.is_empty() {
            !body.trim().is_empty() && !body.trim_start().starts_with('#')
        } else {
            body.split_whitespace().next() == Some(key)
        };
        if hit {
            return Some(start..start + body.len());
        }
        start += line.len();
    }
    None
}

/// The words of the line `key` starts (without the key), if there is one.
pub fn line_words(text: &str, key: &str) -> Option<Vec<String>> {
    let r = line_range(text, key)?;
    let words = text[r].split_whitespace().map(str::to_string);
    Some(if key.is_empty() {
        words.collect()
    } else {
        words.skip(1).collect()
    })
}

/// Edits the line `key` starts: takes out the user's words that set one
/// of cpushield's keys (other than `options` themselves), and appends
/// `options` that are not there. `None` when there is no such line.
pub fn words_edit(text: &str, key: &str, options: &[String]) -> Option<(String, Edit)> {
    let r = line_range(text, key)?;
    let line = &text[r.clone()];
    let mut kept = String::new();
    let mut removed = Vec::new();
    let mut present = Vec::new();
    let mut rest = line;
    let mut first = !key.is_empty();
    // Walk the words with the whitespace before each, so what is kept
    // keeps its spacing.
    while !rest.is_empty() {
        let ws = rest.len() - rest.trim_start().len();
        let after_ws = &rest[ws..];
        if after_ws.is_empty() {
            kept.push_str(rest);
            break;
        }
        let wlen = after_ws.find(char::is_whitespace).unwrap_or(after_ws.len());
        let word = &after_ws[..wlen];
        let ours = options.iter().any(|o| o == word);
        if !first && own_key(word) && !ours {
            removed.push(word.to_string());
        } else {
            if ours {
                present.push(word.to_string());
            }
            kept.push_str(&rest[..ws + wlen]);
        }
        first = false;
        rest = &after_ws[wlen..];
    }
    let added: Vec<String> = options
        .iter()
        .filter(|o| !present.contains(o))
        .cloned()
        .collect();
    let trailing = kept.len() - kept.trim_end().len();
    let (body, tail) = kept.split_at(kept.len() - trailing);
    let mut new_line = body.to_string();
    for w in &added {
        new_line.push(' ');
        new_line.push_str(w);
    }
    new_line.push_str(tail);
    let mut out = String::with_capacity(text.len() + 64);
    out.push_str(&text[..r.start]);
    out.push_str(&new_line);
    out.push_str(&text[r.end..]);
    Some((
        out,
        Edit::Words {
            key: key.to_string(),
            added,
            removed,
        },
    ))
}

/// `text` with `block` appended (after a newline, if `text` lacks a final one).
pub fn block_edit(text: &str, block: &str) -> (String, Edit) {
    let mut block = block.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        block.insert(0, '\n');
    }
    (format!("{text}{block}"), Edit::Block { text: block })
}

/// What the file should become on removal, given what it holds `now`
/// (`None`: absent): `Ok((content, how))` with `content` `None` for
/// "remove the file", or `Err` saying why cpushield's part cannot be found.
pub fn undo(change: &FileChange, now: Option<&str>) -> Result<(Option<String>, Undone), String> {
    if now == Some(change.written.as_str()) {
        return Ok((change.before.clone(), Undone::Restored));
    }
    let Some(now) = now else {
        return match &change.edit {
            // Ours, already gone: nothing to restore but the user's file.
            Edit::Whole if change.before.is_none() => Ok((None, Undone::Restored)),
            _ => Err("it is gone".into()),
        };
    };
    match &change.edit {
        Edit::Whole => Ok((change.before.clone(), Undone::Restored)),
        Edit::Block { text } => match now.matches(text.as_str()).count() {
            1 => Ok((Some(now.replacen(text.as_str(), "", 1)), Undone::Cut)),
            0 => Err("cpushield's block is no longer in it as written".into()),
            _ => Err("cpushield's block is in it more than once".into()),
        },
        Edit::Words {
            key,
            added,
            removed,
        } => {
            let r = line_range(now, key).ok_or("its line is gone")?;
            let line = &now[r.clone()];
            let ours = added.iter().fold(String::new(), |s, w| s + " " + w);
            let cut = if ours.is_empty() {
                line.to_string()
            } else if line.matches(ours.as_str()).count() == 1 {
                let put_back = removed.iter().fold(String::new(), |s, w| s + " " + w);
                line.replacen(ours.as_str(), &put_back, 1)
            } else {
                return Err(format!(
                    "its line no longer holds '{}' as written",
                    ours.trim()
                ));
            };
            Ok((
                Some(format!("{}{cut}{}", &now[..r.start], &now[r.end..])),
                Undone::Cut,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn change(path: &str, before: Option<&str>, written: String, edit: Edit) -> FileChange {
        FileChange {
            path: path.into(),
            before: before.map(str::to_string),
            written,
            edit,
            made_dir: false,
        }
    }

    const OURS: &str = "isolcpus=managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1";

    #[test]
    fn words_replace_the_users_conflicting_values_and_undo_byte_for_byte() {
        let entry = "title Debian\nversion 6.12\noptions  root=/dev/vda2 rw\tnohz_full=1 quiet  \nlinux /vmlinuz\n";
        let (new, edit) = words_edit(entry, "options", &opts(OURS)).unwrap();
        assert_eq!(
            new,
            format!("title Debian\nversion 6.12\noptions  root=/dev/vda2 rw quiet {OURS}  \nlinux /vmlinuz\n")
        );
        let Edit::Words { removed, added, .. } = &edit else {
            panic!()
        };
        assert_eq!(removed, &opts("nohz_full=1"));
        assert_eq!(added.len(), 4);
        // Exactly one nohz_full= on the line.
        let words = line_words(&new, "options").unwrap();
        assert_eq!(
            words.iter().filter(|w| w.starts_with("nohz_full=")).count(),
            1
        );
        let c = change("e.conf", Some(entry), new.clone(), edit.clone());
        assert_eq!(
            undo(&c, Some(&new)).unwrap(),
            (Some(entry.to_string()), Undone::Restored)
        );
        // Changed since (a word added by the user): ours cut, theirs back.
        let later = new.replace(" quiet ", " quiet splash ");
        let (back, how) = undo(&c, Some(&later)).unwrap();
        assert_eq!(how, Undone::Cut);
        assert_eq!(
            back.unwrap(),
            "title Debian\nversion 6.12\noptions  root=/dev/vda2 rw quiet splash nohz_full=1  \nlinux /vmlinuz\n"
        );
        // Our words gone: refused.
        assert!(undo(&c, Some(entry)).is_err());
    }

    #[test]
    fn words_already_there_are_not_added_twice_and_a_first_line_is_found() {
        let cmdline = "# kernel command line\nroot=UUID=x ro nohz_full=2-3\n";
        let (new, edit) = words_edit(cmdline, "", &opts("nohz_full=2-3 rcu_nocbs=2-3")).unwrap();
        assert_eq!(
            new,
            "# kernel command line\nroot=UUID=x ro nohz_full=2-3 rcu_nocbs=2-3\n"
        );
        assert_eq!(
            edit,
            Edit::Words {
                key: String::new(),
                added: opts("rcu_nocbs=2-3"),
                removed: vec![]
            }
        );
        assert!(words_edit("title x\n", "options", &opts(OURS)).is_none());
        // The key word itself is never taken for an option.
        let (new, _) = words_edit("options\n", "options", &opts("nohz_full=3")).unwrap();
        assert_eq!(new, "options nohz_full=3\n");
    }

    #[test]
    fn a_block_is_appended_and_cut_verbatim() {
        let user = "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=\"quiet\"";
        let (new, edit) = block_edit(user, "# cpushield: begin\nX=1\n# cpushield: end\n");
        assert!(new.starts_with(user) && new.ends_with("# cpushield: end\n"));
        let c = change("etc/default/grub", Some(user), new.clone(), edit);
        assert_eq!(undo(&c, Some(&new)).unwrap().0.as_deref(), Some(user));
        let later = format!("GRUB_DEFAULT=1\n{new}");
        assert_eq!(
            undo(&c, Some(&later)).unwrap(),
            (Some(format!("GRUB_DEFAULT=1\n{user}")), Undone::Cut)
        );
        assert!(undo(&c, Some(user)).is_err());
        assert!(undo(&c, None).is_err());
    }

    #[test]
    fn a_whole_file_goes_back_to_what_it_was_or_away() {
        let c = change(
            "etc/kernel/cmdline",
            None,
            "ro nohz_full=3\n".into(),
            Edit::Whole,
        );
        assert_eq!(
            undo(&c, Some("ro nohz_full=3\n")).unwrap(),
            (None, Undone::Restored)
        );
        assert_eq!(undo(&c, None).unwrap(), (None, Undone::Restored));
    }
}
