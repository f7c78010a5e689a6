//! Words that sound as a typed string does: the candidates of a misspelling written by ear,
//! three or more letters from the word (`nessisary` for `necessary`, `cimptums` for
//! `symptoms`), which no search of two edits reaches.
//!
//! Each word is filed under its sound key: its consonants in Soundex's classes (Russell and
//! Odell, 1918: the letters a writer confuses by ear share a class), a run of one class written
//! once, and each run of vowels as one mark, whatever letters spell it: the syllables the writer
//! heard. The spellings English writes one sound with are read first (`ph`, `tch`, a silent
//! `gh`, a first `kn`, `wr`, `ps`, a last silent `e`, `gn`, `mb`). Unlike Soundex, the key keeps
//! every consonant and no first letter: the error model, not the key, prices how far a word is
//! from the string.

/// A key's letters: one byte per consonant class, `1` to `6`, and [`VOWEL`] per vowel.
pub type SoundKey = Vec<u8>;

/// Soundex's class of a consonant; 0 for a vowel, `h` or `w`.
fn class(c: u8) -> u8 {
    match c {
        b'b' | b'f' | b'p' | b'v' => 1,
        b'c' | b'g' | b'j' | b'k' | b'q' | b's' | b'x' | b'z' => 2,
        b'd' | b't' => 3,
        b'l' => 4,
        b'm' | b'n' => 5,
        b'r' => 6,
        _ => 0,
    }
}

fn is_vowel(c: u8) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

/// Marks a vowel (or a run of them) in a key: a written vowel is a syllable the writer heard,
/// even where they spell it with another letter.
const VOWEL: u8 = b'0';

/// Writes into `key` the sound key of `word` (lower-case ASCII letters; other bytes are left
/// out) and returns how many consonant classes it holds.
pub fn sound_key(word: &[u8], key: &mut SoundKey) -> usize {
    key.clear();
    // A last silent `e` is no syllable (`volatile`, `chlorine`), and a last `le` after a
    // consonant sounds as `el` or `ul` do (`purple`, `handle`).
    let (w, le) = match word {
        [.., c, b'l', b'e'] if !is_vowel(*c) => (&word[..word.len() - 2], true),
        [.., c, b'e'] if !is_vowel(*c) && word.len() > 3 => (&word[..word.len() - 1], false),
        _ => (word, false),
    };
    let n = w.len();
    // Silent first letters: `knee`, `gnome`, `pneumonia`, `write`, `psalm`; a first `y`
    // before a vowel is a consonant the ear barely marks (`young`).
    let mut i = match w {
        [b'k' | b'g' | b'p', b'n', ..] | [b'w', b'r', ..] | [b'p', b's', ..] => 1,
        [b'y', c, ..] if is_vowel(*c) => 1,
        _ => 0,
    };
    let mut classes = 0;
    // What was last written: a vowel parts two letters of one class (`s` and `c` in
    // `necessary` are two sounds), `h` and `w` part nothing (`tch`).
    let mut last = 0u8;
    let mut push = |code: u8, key: &mut SoundKey| {
        if code != last {
            key.push(code);
            last = code;
            if code != VOWEL {
                classes += 1;
            }
        }
    };
    while i < n {
        let c = w[i];
        let next = w.get(i + 1).copied();
        let code = match (c, next) {
            // `ph` sounds `f`; `gh` is silent or `f`, and never a `g` after a vowel.
            (b'p', Some(b'h')) => {
                i += 1;
                b'1'
            }
            (b'g', Some(b'h')) if i > 0 => {
                i += 2;
                continue;
            }
            // `t` before `ch` and `d` before `g` or `j` are the one sound (`watch`, `edge`).
            (b't', Some(b'c')) if w.get(i + 2) == Some(&b'h') => 0,
            (b'd', Some(b'g' | b'j')) => 0,
            // A last `gn` is `n` (`sign`, `sovereign`), a last `mb` is `m` (`climb`).
            (b'g', Some(b'n')) if i + 2 == n => 0,
            (b'b', None) if i > 0 && w[i - 1] == b'm' => 0,
            _ if is_vowel(c) => VOWEL,
            _ => match class(c) {
                0 => 0,
                k => b'0' + k,
            },
        };
        if code != 0 {
            push(code, key);
        }
        i += 1;
    }
    if le {
        push(VOWEL, key);
        push(b'4', key);
    }
    classes
}

/// The sound keys of a word list, each word filed under its key's hash.
pub struct SoundIndex {
    /// (hash of a key, word id), sorted.
    entries: Vec<(u64, u32)>,
}

impl std::fmt::Debug for SoundIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoundIndex")
            .field("entries", &self.entries.len())
            .finish()
    }
}

fn hash(key: &[u8]) -> u64 {
    // FNV-1a over the key's bytes, then a finaliser.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^ (h >> 29)
}

impl SoundIndex {
    /// Files every word of `words` whose key has at least `min_key` classes (ids are positions
    /// in the input; words with other than lower-case ASCII letters are left out).
    pub fn build<'a>(words: impl IntoIterator<Item = &'a str>, min_key: usize) -> Self {
        let mut key = SoundKey::with_capacity(32);
        let mut entries: Vec<(u64, u32)> = words
            .into_iter()
            .enumerate()
            .filter_map(|(id, w)| {
                let b = w.as_bytes();
                if !b.iter().all(u8::is_ascii_lowercase) {
                    return None;
                }
                (sound_key(b, &mut key) >= min_key).then(|| (hash(&key), id as u32))
            })
            .collect();
        entries.sort_unstable();
        SoundIndex { entries }
    }

    /// Appends to `out` the id of every word that sounds as `typed` does (the same key; a
    /// collision of hashes adds a word the caller's edit check rules out).
    pub fn lookup(&self, typed: &str, out: &mut Vec<u32>) {
        let mut key = SoundKey::with_capacity(32);
        if sound_key(typed.as_bytes(), &mut key) == 0 {
            return;
        }
        let h = hash(&key);
        let from = self.entries.partition_point(|&(e, _)| e < h);
        out.extend(
            self.entries[from..]
                .iter()
                .take_while(|&&(e, _)| e == h)
                .map(|&(_, id)| id),
        );
    }

    /// Bytes held in memory.
    pub fn heap_bytes(&self) -> usize {
        self.entries.len() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(w: &str) -> String {
        let mut k = SoundKey::new();
        sound_key(w.as_bytes(), &mut k);
        String::from_utf8(k).unwrap_or_default()
    }

    #[test]
    fn misspellings_by_ear_share_the_word_s_key() {
        for (typed, meant) in [
            ("nessisary", "necessary"),
            ("necasery", "necessary"),
            ("cimptums", "symptoms"),
            ("stummac", "stomach"),
            ("cloreen", "chlorine"),
            ("volital", "volatile"),
            ("resteraunt", "restaurant"),
            ("warantee", "warranty"),
            ("sucesfuly", "successfully"),
            ("perpul", "purple"),
            ("fone", "phone"),
            ("rite", "write"),
            ("nife", "knife"),
            ("wach", "watch"),
            ("nite", "night"),
        ] {
            assert_eq!(key(typed), key(meant), "{typed} / {meant}");
        }
    }

    #[test]
    fn words_of_other_sounds_have_other_keys() {
        for (a, b) in [
            ("necessary", "nursery"),
            ("symptoms", "systems"),
            ("purple", "people"),
            ("stomach", "stack"),
            // A vowel parts two letters of one class.
            ("sister", "sitter"),
            // So does a syllable: `painite` is no `point`, `twilled` no `told`.
            ("painite", "point"),
            ("twilled", "told"),
            ("puritus", "parts"),
        ] {
            assert_ne!(key(a), key(b), "{a} / {b}");
        }
        assert_eq!(key("necessary"), "50202060");
        assert_eq!(key("aeiou"), "0");
    }

    #[test]
    fn lookup_finds_the_words_filed_under_the_typed_key() {
        let words = ["necessary", "symptoms", "nursery", "café", "ness"];
        let index = SoundIndex::build(words, 3);
        let mut out = Vec::new();
        index.lookup("nessisary", &mut out);
        assert_eq!(out, vec![0]);
        out.clear();
        index.lookup("cimptums", &mut out);
        assert_eq!(out, vec![1]);
        out.clear();
        // `ness` has a key of two classes: not filed.
        index.lookup("nes", &mut out);
        assert!(out.is_empty());
    }
}
