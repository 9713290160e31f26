//! A reducer saved as bytes and read back anywhere in a line goes on exactly as if it had not
//! been; bytes that are not a saved state never read back as one, and never panic.

use super::*;
use crate::json::utf8_stream::Utf8Stream;

/// What a reducer holds, all of it: its `Debug`, less the UTF-8 stream's unused buffer bytes.
fn state_of(r: &Reducer) -> String {
    let mut r = r.clone();
    r.utf8 = Utf8Stream::resumed(r.utf8.pending(), r.utf8.replaced()).unwrap_or_else(|| panic!("{r:?}"));
    format!("{r:?}")
}

/// `r` after a trip through its bytes: it reads back as the same state, holding no more, and
/// writes back to the same bytes.
fn through_bytes(r: &Reducer) -> Reducer {
    let bytes = r.to_bytes();
    let back = Reducer::from_bytes(&bytes).unwrap_or_else(|| panic!("does not read back: {r:?}"));
    assert_eq!(back.to_bytes(), bytes, "{r:?}");
    assert_eq!(state_of(&back), state_of(r));
    assert!(back.held_bytes() <= r.held_bytes(), "{} > {}", back.held_bytes(), r.held_bytes());
    back
}

/// Reduces `bytes` in pieces that end at `cuts` (ascending), saving the reducer after each.
fn reduce_saved(bytes: &[u8], cuts: &[usize], limits: Limits) -> Result<Reduced, Unreduced> {
    let mut r = Reducer::new(limits);
    let mut from = 0;
    for &to in cuts {
        let to = to.clamp(from, bytes.len());
        r.feed(&bytes[from..to]);
        r = through_bytes(&r);
        assert!(r.held_bytes() <= limits.max_memory);
        from = to;
    }
    r.feed(&bytes[from..]);
    r.finish()
}

/// Saved at each position alone, then at every position in turn: the result of the line never
/// saved.
fn saved_anywhere(bytes: &[u8], limits: Limits) -> Result<Reduced, Unreduced> {
    let whole = reduce(bytes, limits);
    for at in 0..=bytes.len() {
        assert_eq!(reduce_saved(bytes, &[at], limits), whole, "{bytes:?} saved at {at}");
    }
    let every: Vec<usize> = (0..=bytes.len()).collect();
    assert_eq!(reduce_saved(bytes, &every, limits), whole, "{bytes:?} saved at every byte");
    whole
}

/// Saved at each of `positions` (ascending) alone, then at all of them in turn: the result of
/// the line never saved (for lines too long to save everywhere).
fn saved_at(bytes: &[u8], positions: &[usize], limits: Limits) -> Result<Reduced, Unreduced> {
    let whole = reduce(bytes, limits);
    let mut r = Reducer::new(limits);
    let mut from = 0;
    for &at in positions {
        r.feed(&bytes[from..at]);
        from = at;
        let mut resumed = through_bytes(&r);
        resumed.feed(&bytes[at..]);
        assert_eq!(resumed.finish(), whole, "saved at {at}");
    }
    assert_eq!(reduce_saved(bytes, positions, limits), whole, "saved at each in turn");
    whole
}

/// `n` positions spread over `len`, each with the two after it (so as to land inside tokens).
fn spread(len: usize, n: usize) -> Vec<usize> {
    let mut at: Vec<usize> = (0..n).flat_map(|k| (0..3).map(move |d| (len * k / n + d).min(len))).collect();
    at.dedup();
    at
}

/// Lines whose reduction is at stake where pieces cut them: characters of several bytes,
/// surrogate pairs and other escapes, literals, numbers, keys; and broken ones.
const SPLIT_SAMPLES: &[&[u8]] = &[
    "[\"é日😀\\u00e9\\ud83d\\ude00\\n\\\"ab\"]".as_bytes(),
    "{\"k\\ud83d\\ude00é\":[true,false,null,-12.5e+3,0,1E400,\"\"],\"z\":{}}".as_bytes(),
    b"[tru",
    b"[truE]",
    b"nulL",
    b"[-]",
    b"[1.e5]",
    b"[\"\\u12\"]",
    b"[\"\\ud83d\\u",
    b"{\"type\":\"\xff\xfe\",\"timestamp\":1}",
    b"[\"\xe0\x80\xaf\",\"\xf0\x90\x80\"]",
    b"[\"\xf0\x90\x80\"",
    b"\xef\xbb\xbf{}",
    b"{\"\xc3\":1}",
];

/// The corpora of the reducer's own tests and the samples above, saved at every position
/// under limits that cut nothing, everything, and some.
#[test]
fn saved_anywhere_the_corpora_reduce_as_never_saved() {
    let corpora = ACCEPTED.iter().chain(REFUSED).map(|t| t.as_bytes()).chain(SPLIT_SAMPLES.iter().copied());
    for bytes in corpora {
        for limits in [roomy(), tight(), Limits::new(16, 8, 1024)] {
            let _ = saved_anywhere(bytes, limits);
        }
    }
}

#[test]
fn saved_anywhere_cut_strings_keys_and_numbers_reduce_as_never_saved() {
    let unit = "é日😀\\u00e9\\ud83d\\ude00ab\\n";
    let strings = format!("[\"{}\",\"{}\",\"short\"]", unit.repeat(6), "x".repeat(40));
    let keys = format!("{{\"{}\":1,\"v\":[1{}],\"w\":-0.{}e-7}}", "k😀".repeat(20), "0".repeat(30), "5".repeat(30));
    let broken = format!("[\"{}\\x\"]", "a".repeat(40));
    let limits = Limits::new(16, 8, 1024);
    for line in [&strings, &keys] {
        let r = saved_anywhere(line.as_bytes(), limits).unwrap_or_else(|e| panic!("{line}: {e:?}"));
        assert!(r.cut_values && !r.cut_containers, "{}", r.text);
        saved_anywhere(line.as_bytes(), tight()).unwrap_or_else(|e| panic!("{line}: {e:?}"));
    }
    assert!(matches!(saved_anywhere(broken.as_bytes(), limits), Err(Unreduced::Invalid { .. })));
}

#[test]
fn saved_anywhere_collapsed_containers_and_lines_too_large_reduce_as_never_saved() {
    let limits = Limits::new(64, 16, 1024);
    let items = vec!["[1,\"é\",{\"b\":null}]"; 60].join(",");
    let collapsed = format!(
        "{{\"type\":\"x\",\"message\":{{\"usage\":{{\"n\":5}},\"content\":[{items}]}},\"after\":[1,{{\"b\":2}}]}}"
    );
    let r = saved_anywhere(collapsed.as_bytes(), limits).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(r.cut_containers && r.text.ends_with(",\"after\":[1,{\"b\":2}]}"), "{}", r.text);
    // The root too large: a string, an object, nesting deeper than its bits may follow.
    let string = format!("\"{}\"", "s".repeat(600));
    let flat = format!("{{{}\"z\":0}}", (0..100).map(|i| format!("\"k{i}\":{i},")).collect::<String>());
    let deep = format!("{}{}", "[".repeat(2100), "]".repeat(2100));
    for line in [&string, &flat, &deep] {
        assert_eq!(saved_anywhere(line.as_bytes(), limits), Err(Unreduced::TooLarge), "{line}");
    }
    let mut too_deep = Reducer::new(limits);
    too_deep.feed(deep.as_bytes());
    assert!(too_deep.failed(), "the nesting bits gave out before the end");
    // ... and still validated to the end.
    let after = format!("{string} x");
    assert!(matches!(saved_anywhere(after.as_bytes(), limits), Err(Unreduced::Invalid { .. })));
}

#[test]
fn saved_after_bytes_stepped_over_the_line_stays_unknown() {
    let mut r = Reducer::new(roomy());
    r.feed(b"{\"a\":\"\xc3");
    r.skip(4096);
    let mut r = through_bytes(&r);
    r.feed(b"\xa9\"}");
    assert_eq!(r.finish(), Err(Unreduced::Unknown { at: 6 }));
}

#[test]
fn random_documents_saved_anywhere_reduce_as_never_saved() {
    let mut g = Gen(0x2545_f491_4f6c_dd1d);
    let (mut valid, mut cut) = (0, 0);
    for round in 0..2500 {
        let doc = g.document();
        let limits = if round % 2 == 0 { roomy() } else { Limits::new(8 + g.below(24), g.below(12), 1024) };
        let result = if doc.len() <= 48 {
            saved_anywhere(&doc, limits)
        } else {
            let mut positions: Vec<usize> = (0..8).map(|_| g.below(doc.len() + 1)).collect();
            positions.sort_unstable();
            saved_at(&doc, &positions, limits)
        };
        if let Ok(r) = result {
            valid += 1;
            cut += usize::from(r.truncated());
        }
    }
    assert!(valid > 600 && cut > 50, "too few samples to mean anything: {valid} valid, {cut} cut");
}

#[test]
fn long_lines_saved_at_many_places_reduce_as_never_saved() {
    let numbers = vec!["1"; 12_000].join(",");
    let collapsed = format!(
        "{{\"type\":\"assistant\",\"message\":{{\"usage\":{{\"input_tokens\":5}},\"content\":[{numbers}]}},\"after\":1}}"
    );
    let limits = Limits::new(1024, 64, 16 * 1024);
    let r = saved_at(collapsed.as_bytes(), &spread(collapsed.len(), 60), limits).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(r.cut_containers);
    let strings =
        format!("{{\"type\":\"x\",\"out\":[\"{}\",\"{}\"]}}", "日\\n😀".repeat(8000), "\\ud83d\\ude00".repeat(3000));
    let r = saved_at(strings.as_bytes(), &spread(strings.len(), 60), limits).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(r.cut_values);
}

/// The state of a 100 MB line with one long string, saved after each 64 KiB piece, is a few
/// hundred bytes once the string is known to be cut: what the summary holds. Before that it
/// holds the string's first 64 KiB, which it may yet have to write whole.
#[test]
fn a_hundred_megabyte_line_saved_between_its_pieces_is_reduced_as_never_saved() {
    let limits = Limits::for_line_memory(64 << 20);
    let mut never_saved = Reducer::new(limits);
    feed_huge_line(&mut never_saved, 100 << 20, limits);
    let mut sizes = Vec::new();
    let mut r = Reducer::new(limits);
    feed_huge_line_between(&mut r, 100 << 20, limits, &mut |r| {
        *r = through_bytes(r);
        sizes.push(r.to_bytes().len());
    });
    assert_eq!(through_bytes(&r).finish(), never_saved.finish());
    let (first, rest) = sizes.split_first().unwrap_or_else(|| panic!("no pieces"));
    assert!(*first > 64 * 1024 - 1024 && *first < 64 * 1024 + 256, "{first} bytes before the cut");
    let largest = rest.iter().max().copied().unwrap_or_default();
    assert!(rest.len() > 1500 && largest < HEAD_BYTES + 256, "{largest} bytes once cut");
}

/// Snapshots of states of every kind, each with the rest of its line and its limits.
fn snapshots() -> Vec<(Vec<u8>, Vec<u8>, Limits)> {
    let collapsed = format!("{{\"a\":[{}],\"b\":[1,[2]]}}", vec!["{\"x\":[1,2,3]}"; 60].join(","));
    let lines: Vec<(Vec<u8>, Limits)> = vec![
        (b"{\"k\\ud83d\\ude00\xc3\xa9\":[true,false,null,-12.5e+3,\"\\u00e9\"],\"z\":{}} ".to_vec(), roomy()),
        (format!("[\"{}\",1{}]", "ab\\n".repeat(20), "0".repeat(30)).into_bytes(), Limits::new(16, 8, 1024)),
        (collapsed.into_bytes(), Limits::new(64, 16, 1024)),
        (format!("\"{}\"", "s".repeat(700)).into_bytes(), Limits::new(16, 8, 1024)),
        (b"[1,2,\"\xff\" x]".to_vec(), tight()),
    ];
    let mut out = Vec::new();
    for (line, limits) in lines {
        for at in spread(line.len(), 8) {
            let mut r = Reducer::new(limits);
            r.feed(&line[..at]);
            out.push((r.to_bytes(), line[at..].to_vec(), limits));
        }
    }
    let mut unknown = Reducer::new(roomy());
    unknown.feed(b"[\"\xf0\x9f");
    unknown.skip(1);
    out.push((unknown.to_bytes(), b"\x98\x80\"]".to_vec(), roomy()));
    out
}

/// `bytes` with its CRC made right again: damage the CRC alone would refuse.
fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.truncate(bytes.len().saturating_sub(4));
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// A state that read back from bytes that were not saved is one the reducer could be in: it
/// writes back to those very bytes, holds and goes on within its memory, and never panics.
fn goes_on_consistently(bytes: &[u8], rest: &[u8]) -> bool {
    let Some(mut r) = Reducer::from_bytes(bytes) else { return false };
    assert_eq!(r.to_bytes(), bytes);
    let max_memory = r.limits.max_memory;
    assert!(r.held_bytes() <= max_memory);
    for piece in rest.chunks(3) {
        r.feed(piece);
        assert!(r.held_bytes() <= max_memory, "{} > {max_memory}", r.held_bytes());
    }
    let _ = r.finish();
    true
}

#[test]
fn damaged_or_foreign_bytes_do_not_read_back() {
    let samples = snapshots();
    assert!(samples.len() > 40);
    for (bytes, _, _) in &samples {
        for end in 0..bytes.len() {
            assert!(Reducer::from_bytes(&bytes[..end]).is_none(), "a prefix of {end} bytes");
        }
        for at in 0..bytes.len() {
            for mask in [0x01, 0x80, 0xff] {
                let mut damaged = bytes.clone();
                damaged[at] ^= mask;
                assert!(Reducer::from_bytes(&damaged).is_none(), "byte {at} ^ {mask:#x}");
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Reducer::from_bytes(&longer).is_none());
        assert!(Reducer::from_bytes(&resealed(longer)).is_none(), "a trailing byte");
        let mut version_2 = bytes.clone();
        version_2[TAG_LEN] = 2;
        assert!(Reducer::from_bytes(&resealed(version_2)).is_none(), "another version");
    }
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let len = g.below(80);
        let noise: Vec<u8> = (0..len).map(|_| g.next() as u8).collect();
        assert!(Reducer::from_bytes(&noise).is_none());
        assert!(Reducer::from_bytes(&resealed(noise)).is_none());
    }
}

/// Where the format's version is: after its tag.
const TAG_LEN: usize = 3;

/// Damage that keeps the CRC right (a foreign writer, or a forger) is refused by the checks of
/// the state itself, or reads back as a state the reducer could be in.
#[test]
fn damage_past_the_crc_reads_back_only_as_a_consistent_state() {
    let (mut refused, mut read_back) = (0, 0);
    for (bytes, rest, _) in snapshots() {
        let body = bytes.len() - 4;
        for at in 0..body {
            for mask in [0x01, 0x10, 0xff] {
                let mut damaged = bytes.clone();
                damaged[at] ^= mask;
                if goes_on_consistently(&resealed(damaged), &rest) {
                    read_back += 1;
                } else {
                    refused += 1;
                }
            }
        }
        for end in 0..body {
            let mut cut = bytes[..end].to_vec();
            cut.extend_from_slice(&crc32fast::hash(&bytes[..end]).to_le_bytes());
            assert!(!goes_on_consistently(&cut, &rest), "the body's first {end} bytes");
        }
    }
    let mut g = Gen(0x0123_4567_89ab_cdef);
    for _ in 0..20_000 {
        let mut forged = b"CBR\x01".to_vec();
        forged.extend(
            (0..g.below(48)).map(|_| *[0u8, 1, 2, 3, 8, 0x80, 0xff].get(g.below(8)).unwrap_or(&(g.next() as u8))),
        );
        forged.extend_from_slice(&[0; 4]);
        if goes_on_consistently(&resealed(forged), b"1]}\"") {
            read_back += 1;
        }
    }
    assert!(refused > 1000 && read_back > 1000, "{refused} refused, {read_back} read back");
}

/// A change made to a reducer's state.
type Damage = fn(&mut Reducer);

/// A state the reducer cannot be in does not read back, even with its CRC right: each check of
/// `consistent`, and of the reading, refuses what it is there for.
#[test]
fn states_the_reducer_cannot_be_in_do_not_read_back() {
    let mut base = Reducer::new(Limits::new(16, 8, 1024));
    base.feed(b" {\"a\":[1,\"x\xc3");
    assert!(Reducer::from_bytes(&base.to_bytes()).is_some());
    let damage: &[(&str, Damage)] = &[
        ("output past the string's text", |r| r.out.push(b'y')),
        ("the string's start not at its quote", |r| r.scalar_start = 9),
        ("a frame fewer than the depth", |r| r.frames.truncate(1)),
        ("more levels than nesting bits", |r| r.depth = 65),
        ("the root's bit says array at a brace", |r| r.objects[0] = 0),
        ("a frame not at a bracket", |r| r.frames[1].out_start = 7),
        ("a frame at text not yet read", |r| r.frames[1].in_start = 11),
        ("frames out of order", |r| r.frames[1].in_start = 1),
        ("a literal already whole", |r| r.scalar = Some(Scalar::Lit { word: b"true", matched: 4 })),
        ("an escape no grammar has", |r| r.scalar = Some(Scalar::Str { key: false, escape: Escape::Hex(4) })),
        ("a value string where a colon is expected", |r| r.expect = Expect::Colon),
        ("a scalar after the root", |r| r.expect = Expect::Trail),
        ("the root collapsed", |r| r.collapsed = Some(Collapsed { level: 0, in_start: 1 })),
        ("too large with a summary", |r| r.failed = Some(Unreduced::TooLarge)),
        ("unknown before where reading stopped", |r| r.failed = Some(Unreduced::Unknown { at: 3 })),
        ("invalid past the text read", |r| r.failed = Some(Unreduced::Invalid { at: 12, what: "bad number" })),
        ("a what no problem has", |r| r.failed = Some(Unreduced::Invalid { at: 2, what: "bad" })),
        ("output past its budget", |r| r.out.resize(600, b' ')),
        ("frames past their budget", |r| r.limits.max_memory = 64),
        ("cut while within max_string", |r| r.scalar_cut = true),
        ("cuttable at another depth than the string's", |r| r.scalar_cuttable = false),
    ];
    for (what, damage) in damage {
        let mut r = base.clone();
        damage(&mut r);
        assert!(Reducer::from_bytes(&r.to_bytes()).is_none(), "{what}");
    }
    // In the bytes themselves (offsets as in `the_format_is_fixed`): a pending byte that starts
    // no character, an integer not in its shortest form, a flag no field has.
    let bytes = base.to_bytes();
    let mut not_a_start = bytes.clone();
    not_a_start[9] = b'A';
    let mut long_form = bytes[..4].to_vec();
    long_form.extend_from_slice(&[0x90, 0x00]);
    long_form.extend_from_slice(&bytes[5..]);
    let mut unknown_flag = bytes.clone();
    unknown_flag[18] |= 0x40;
    for (what, damaged) in [("pending", not_a_start), ("long form", long_form), ("flag", unknown_flag)] {
        assert!(Reducer::from_bytes(&resealed(damaged)).is_none(), "{what}");
    }
}

/// The format is fixed: a known state writes exactly these bytes.
#[test]
fn the_format_is_fixed() {
    let mut r = Reducer::new(Limits::new(16, 8, 1024));
    r.feed(b" {\"a\":[1,\"x\xc3");
    let hex: String = r.to_bytes().iter().map(|b| format!("{b:02x} ")).collect();
    let want = [
        "43 42 52 01",                      // "CBR", version 1
        "10 08 80 08",                      // limits 16, 8, 1024
        "01 c3",                            // the cut character: one byte, C3
        "0c 0b",                            // 12 bytes fed, 11 read
        "01",                               // expecting a value
        "01 00 00",                         // in a string, not a key, no escape
        "08 01",                            // which starts at 8 and holds 1 byte so far
        "02",                               // cuttable
        "02 01 01 00 00 00 00 00 00 00",    // depth 2: an object holding an array
        "02 00 01 05 05",                   // their brackets at (0, 1), (5, 6)
        "00",                               // nothing collapsed
        "0a 7b 22 61 22 3a 5b 31 2c 22 78", // the output: {"a":[1,"x
        "00",                               // not failed
        "3d 5f b7 09",                      // CRC-32
    ];
    assert_eq!(hex.trim_end(), want.join(" "));
}

/// Each `what` has its own place in the table a saved state names it by, and every problem
/// has one.
#[test]
fn every_problem_has_a_place() {
    assert_eq!(Problem::ALL.len(), Problem::BadLiteral as usize + 1);
    for (i, p) in Problem::ALL.iter().enumerate() {
        assert_eq!(*p as usize, i, "{p:?}");
        assert_eq!(Problem::ALL.iter().filter(|q| q.what() == p.what()).count(), 1, "{p:?}");
    }
}
