//! Which file a Claude Code session id names. A transcript is `<directory>/<id>.jsonl`, and the
//! same name can sit in more than one directory: any pod can write a file of that name into its
//! own job's directory, and an operator may move a project. So a lookup by id answers only when
//! exactly one file matches (among the files the caller may see), and otherwise lists them and
//! picks none: the most recent one may well be the impostor. Pure.

use crate::error::{CbError, SqlState};

/// The most matching paths an ambiguity error lists (the lookup reads one more, to know there
/// are more).
pub const MAX_LISTED: usize = 10;

/// One catalogue row whose file name is the session id's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    pub path: String,
    /// The file was deleted (its rows are still indexed).
    pub gone: bool,
}

/// The one path among `matches` (at most `MAX_LISTED + 1` of them, in path order), none when
/// nothing matched, or `21000` whose HINT lists the paths.
pub fn the_one(id: &str, mut matches: Vec<Match>) -> Result<Option<String>, CbError> {
    if matches.len() <= 1 {
        return Ok(matches.pop().map(|m| m.path));
    }
    let more = matches.len() > MAX_LISTED;
    let listed: Vec<String> = matches
        .iter()
        .take(MAX_LISTED)
        .map(|m| if m.gone { format!("{} (deleted)", m.path) } else { m.path.clone() })
        .collect();
    let count = if more { format!("more than {MAX_LISTED}") } else { matches.len().to_string() };
    let list = format!("{}{}", listed.join(", "), if more { ", ..." } else { "" });
    Err(CbError::new(SqlState::CardinalityViolation, format!("session id {id} names {count} files in the index"))
        .with_detail(list.clone())
        .with_hint(format!("Call the function with the path of the one you mean instead of the session id: {list}.")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(path: &str, gone: bool) -> Match {
        Match { path: path.to_owned(), gone }
    }

    #[test]
    fn one_match_is_the_answer_and_none_is_none() {
        assert_eq!(the_one("s", vec![]).unwrap(), None);
        assert_eq!(the_one("s", vec![m("/d/a/s.jsonl", false)]).unwrap().as_deref(), Some("/d/a/s.jsonl"));
        assert_eq!(the_one("s", vec![m("/d/a/s.jsonl", true)]).unwrap().as_deref(), Some("/d/a/s.jsonl"));
    }

    #[test]
    fn two_matches_are_an_error_listing_both_never_a_pick() {
        let e = the_one("s", vec![m("/d/a/s.jsonl", false), m("/d/b/s.jsonl", true)]).unwrap_err();
        assert_eq!(e.state, SqlState::CardinalityViolation);
        assert!(e.message.contains("names 2 files"), "{}", e.message);
        let hint = e.hint.unwrap();
        assert!(hint.contains("/d/a/s.jsonl, /d/b/s.jsonl (deleted)"), "{hint}");
    }

    #[test]
    fn many_matches_list_the_first_ten_and_say_there_are_more() {
        let all: Vec<Match> = (0..=MAX_LISTED).map(|i| m(&format!("/d/{i:02}/s.jsonl"), false)).collect();
        let e = the_one("s", all).unwrap_err();
        assert!(e.message.contains("more than 10"), "{}", e.message);
        let hint = e.hint.unwrap();
        assert!(hint.contains("/d/09/s.jsonl, ...") && !hint.contains("/d/10/"), "{hint}");
    }
}
