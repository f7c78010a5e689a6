//! The error model, P(typed | meant): how people mistype a word they mean.
//!
//! A weighted Damerau–Levenshtein alignment of the typed word against the meant one, whose
//! operations cost what their share of human errors says (in nats, −ln P): the errors people
//! make most (a doubled letter dropped or added, a vowel for another vowel, two letters swapped,
//! a key next to the right one) are cheap, an unrelated letter is dear, and sound-alike spellings
//! (`ph`/`f`, `ck`/`k`, `c`/`s`) are rules of their own. Errors in the first letter are rarer
//! than elsewhere (Yannakoudakis & Fawthrop 1983; Kukich 1992), so they pay extra. The weights
//! were set by hand from those published error classes, not learned from any list of
//! misspellings (docs/repair.md says how they were chosen and what they give).

use std::sync::OnceLock;

/// A vowel for another (`seperate`, `definately`).
pub const SUB_VOWEL: f32 = 1.6;
/// A key next to the right one on a QWERTY keyboard (`cst` for `cat`).
pub const SUB_NEIGHBOUR: f32 = 2.0;
/// A letter that sounds like the right one (`c`/`s`, `s`/`z`, `g`/`j`, ...).
pub const SUB_PHONETIC: f32 = 2.2;
/// Any other letter for another.
pub const SUB_OTHER: f32 = 3.6;
/// One of a doubled letter dropped (`accomodate`, `ocurred`).
pub const DEL_DOUBLE: f32 = 0.9;
/// One of a doubled vowel dropped (`chose` for `choose`): rarer than a doubled consonant, as
/// it changes how the word sounds.
pub const DEL_DOUBLE_VOWEL: f32 = 1.6;
/// A vowel dropped (`definitly`).
pub const DEL_VOWEL: f32 = 1.8;
/// A silent final `e` dropped after a consonant (`befor`, `peopl`): it changes nothing in how
/// the word sounds, like a doubled consonant.
pub const DEL_SILENT_E: f32 = 1.1;
/// A silent `h` dropped (`wich`, `rythm`).
pub const DEL_H: f32 = 2.0;
/// A consonant dropped between two consonants, where a cluster blurs it in speech (`lengh`,
/// `goverment`, `artic`).
pub const DEL_CLUSTER: f32 = 2.0;
/// Any other letter dropped.
pub const DEL_OTHER: f32 = 2.6;
/// A letter doubled (`untill`).
pub const INS_DOUBLE: f32 = 1.1;
/// A vowel typed once more where it is already doubled (`speeed`, `goood`): the key held or
/// struck twice, dearer than a doubled consonant as vowels are less often doubled.
pub const INS_DOUBLE_VOWEL: f32 = 2.0;
/// A single vowel doubled into a pair that spells another sound (`meen` for `men`, `hoop` for
/// `hop`): people write the sound they mean, so this is rarer than a stutter of the key, and
/// rarer than the same sound spelt another way (`meen` for `mean` costs 1.0).
pub const INS_VOWEL_PAIR: f32 = 3.0;
/// A letter added that is a key next to its neighbour (`heqrt`).
pub const INS_NEIGHBOUR: f32 = 2.2;
/// A vowel added (`arguement`).
pub const INS_VOWEL: f32 = 2.0;
/// Any other letter added.
pub const INS_OTHER: f32 = 3.2;
/// Two adjacent letters swapped (`recieve`, `teh`).
pub const TRANSPOSE: f32 = 1.5;
/// A letter struck two keys late or early, over two others (`mkea` for `make`, `jstu` for
/// `just`, `soilders`): one slip of the hand, as a swap is, but rarer. Without it the alignment
/// reads it as a letter dropped and another added (3.8–5.8 nats).
pub const MOVE: f32 = 2.6;
/// A long vowel spelt with a silent `e` after its consonant, as `bone` and `cane` spell it,
/// where the word spells it with two vowels (`brane` for `brain`, `lones` for `loans`, `frute`
/// for `fruit`, `speke` for `speak`): one sound spelt another word's way, as the rules'
/// respellings are, where the alignment would read a letter dropped and another added.
pub const VOWEL_PAIR_AS_SILENT_E: f32 = 1.4;
/// The vowel pairs [`VOWEL_PAIR_AS_SILENT_E`] reads a silent `e` as: `ai`, `oa`, `ea`, `ee`,
/// `ui` (first vowel, second vowel).
const VOWEL_PAIRS: &[(u8, u8)] = &[
    (b'a', b'i'),
    (b'o', b'a'),
    (b'e', b'a'),
    (b'e', b'e'),
    (b'u', b'i'),
];
/// Extra cost of an edit at the first letter.
pub const FIRST_LETTER: f32 = 2.0;
/// The share of [`FIRST_LETTER`] that the first two letters swapped pay (`hte`, `owrk`,
/// `rwite`): the first letter is there, struck a key late, a slip of the hand rather than a
/// word begun wrong.
pub const FIRST_SWAP_SHARE: f32 = 0.5;
/// A space put inside a word (`face book`).
pub const JOIN: f32 = 2.4;

/// Sound-alike spellings: (meant, typed, cost).
const RULES: &[(&[u8], &[u8], f32)] = &[
    (b"ph", b"f", 1.2),
    (b"f", b"ph", 1.6),
    (b"ck", b"k", 1.4),
    (b"k", b"ck", 1.6),
    (b"ck", b"c", 1.6),
    (b"c", b"ck", 1.8),
    (b"x", b"ks", 1.6),
    (b"ks", b"x", 1.8),
    (b"cs", b"x", 1.8),
    (b"sc", b"s", 1.6),
    (b"s", b"sc", 1.8),
    (b"gh", b"", 2.2),
    (b"ough", b"ow", 2.2),
    (b"ou", b"o", 1.6),
    (b"tion", b"shun", 2.2),
    (b"ch", b"tch", 1.6),
    (b"tch", b"ch", 1.4),
    (b"qu", b"kw", 2.0),
    (b"wh", b"w", 1.6),
    (b"w", b"wh", 1.8),
    (b"ei", b"ie", 1.2),
    (b"ie", b"ei", 1.2),
    // The same vowel sound spelt the other way (`meen` for `mean`, `beleave`).
    (b"ea", b"ee", 1.0),
    (b"ee", b"ea", 1.2),
    // The vowel of `there`, `where`, `sphere` spelt as in `bear`, `hear`.
    (b"ere", b"ear", 1.2),
    // `-ight` written as it sounds (`nite`, `lite`).
    (b"ight", b"ite", 1.6),
    // The vowel of `law` spelt as in `saw` where the word spells it `au` (`fawcet`, `nawsea`).
    (b"au", b"aw", 1.4),
    // The `ch` of Greek words, which sounds `k`, written so (`stomak`, `skool`, `karisma`).
    (b"ch", b"k", 1.8),
    // A final `-y` kept before `-s` or `-ed` where English writes `-ies`, `-ied` (`familys`,
    // `citys`; `studyed`, `tryed`).
    (b"ies", b"ys", 1.4),
    (b"ied", b"yed", 1.4),
    // The `s` sound before `e` spelt with the letter English did not choose (`sence`,
    // `responce`; `choise`, `sentense`): priced as the letters' sound-alike substitution, so
    // that it names the spelling a sound's without making it cheaper beside other edits
    // (`distace` is no nearer `disease`).
    (b"se", b"ce", SUB_PHONETIC),
    (b"ce", b"se", SUB_PHONETIC),
    // The unstressed vowel of an ending English spells either way (`independant`,
    // `existance`, `responsable`): priced as the vowel for a vowel it is.
    (b"ent", b"ant", SUB_VOWEL),
    (b"ant", b"ent", SUB_VOWEL),
    (b"ence", b"ance", SUB_VOWEL),
    (b"ance", b"ence", SUB_VOWEL),
    (b"ible", b"able", SUB_VOWEL),
    (b"able", b"ible", SUB_VOWEL),
];

/// Whether `typed` is the three letters `meant`, a vowel pair and a consonant, spelt as the
/// first vowel, the consonant and a silent `e` (`ane` for `ain`; [`VOWEL_PAIR_AS_SILENT_E`]).
fn vowel_pair_as_silent_e(meant: &[u8], typed: &[u8]) -> bool {
    let (&[v, w, c], &[tv, tc, e]) = (meant, typed) else {
        return false;
    };
    v == tv
        && c == tc
        && e == b'e'
        && c.is_ascii_lowercase()
        && !is_vowel(c)
        && VOWEL_PAIRS.contains(&(v, w))
}

fn is_vowel(c: u8) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

fn phonetic(a: u8, b: u8) -> bool {
    const PAIRS: &[(u8, u8)] = &[
        (b'c', b's'),
        (b'c', b'k'),
        (b's', b'z'),
        (b'g', b'j'),
        (b'f', b'v'),
        (b'm', b'n'),
        (b'd', b't'),
        (b'b', b'p'),
        (b'q', b'k'),
        (b't', b's'),
    ];
    PAIRS
        .iter()
        .any(|&(x, y)| (x == a && y == b) || (x == b && y == a))
}

/// 26 × 26 QWERTY adjacency of the lower-case letters.
fn neighbours() -> &'static [[bool; 26]; 26] {
    static TABLE: OnceLock<[[bool; 26]; 26]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [[false; 26]; 26];
        for a in b'a'..=b'z' {
            for n in crate::noise::keyboard_neighbours(a as char) {
                if n.is_ascii_lowercase() {
                    t[(a - b'a') as usize][(n as u8 - b'a') as usize] = true;
                }
            }
        }
        t
    })
}

/// Whether two lower-case letters are next to each other on a QWERTY keyboard.
pub(crate) fn adjacent(a: u8, b: u8) -> bool {
    a.is_ascii_lowercase()
        && b.is_ascii_lowercase()
        && neighbours()[(a - b'a') as usize][(b - b'a') as usize]
}

/// [`substitution_of`] for every pair of lower-case letters, computed once.
fn substitution_table() -> &'static [[f32; 26]; 26] {
    static TABLE: OnceLock<[[f32; 26]; 26]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [[0.0; 26]; 26];
        for a in b'a'..=b'z' {
            for b in b'a'..=b'z' {
                t[(a - b'a') as usize][(b - b'a') as usize] = substitution_of(a, b);
            }
        }
        t
    })
}

/// Cost of typing `typed` for `meant`: from [`substitution_table`] for lower-case letters.
#[inline(always)]
fn substitution_in(table: &[[f32; 26]; 26], meant: u8, typed: u8) -> f32 {
    if meant.is_ascii_lowercase() && typed.is_ascii_lowercase() {
        table[(meant - b'a') as usize][(typed - b'a') as usize]
    } else {
        substitution_of(meant, typed)
    }
}

fn substitution_of(meant: u8, typed: u8) -> f32 {
    if is_vowel(meant) && is_vowel(typed) {
        SUB_VOWEL
    } else if adjacent(meant, typed) {
        SUB_NEIGHBOUR
    } else if phonetic(meant, typed) {
        SUB_PHONETIC
    } else {
        SUB_OTHER
    }
}

/// Cost of leaving out `meant[i]`.
fn deletion(meant: &[u8], i: usize) -> f32 {
    let c = meant[i];
    if (i > 0 && meant[i - 1] == c) || meant.get(i + 1) == Some(&c) {
        if is_vowel(c) {
            DEL_DOUBLE_VOWEL
        } else {
            DEL_DOUBLE
        }
    } else if c == b'e' && i + 1 == meant.len() && i >= 2 && !is_vowel(meant[i - 1]) {
        DEL_SILENT_E
    } else if is_vowel(c) {
        DEL_VOWEL
    } else if c == b'h' {
        DEL_H
    } else if i > 0 && meant.get(i + 1).is_some_and(|&n| !is_vowel(n)) && !is_vowel(meant[i - 1]) {
        DEL_CLUSTER
    } else {
        DEL_OTHER
    }
}

/// Cost of typing the extra letter `typed[j]`.
fn insertion(typed: &[u8], j: usize) -> f32 {
    let c = typed[j];
    let prev = j.checked_sub(1).map(|p| typed[p]);
    let next = typed.get(j + 1).copied();
    if prev == Some(c) || next == Some(c) {
        let tripled = (j >= 2 && typed[j - 2] == c && prev == Some(c))
            || typed.get(j + 2) == Some(&c) && next == Some(c)
            || prev == Some(c) && next == Some(c);
        match (is_vowel(c), tripled) {
            (false, _) => INS_DOUBLE,
            (true, true) => INS_DOUBLE_VOWEL,
            (true, false) => INS_VOWEL_PAIR,
        }
    } else if prev.is_some_and(|p| adjacent(p, c)) || next.is_some_and(|n| adjacent(n, c)) {
        INS_NEIGHBOUR
    } else if is_vowel(c) {
        INS_VOWEL
    } else {
        INS_OTHER
    }
}

/// Whether `typed` is `meant` with one slip of the hand — two letters swapped, a key next to
/// the right one, a letter left out, or one added that doubles a letter or is a key next to
/// its neighbour — rather than of spelling (a vowel for a vowel, a sound-alike letter): what
/// happens to a word the writer knows how to spell.
pub fn slip_of_the_hand(typed: &[u8], meant: &[u8]) -> bool {
    let prefix = typed.iter().zip(meant).take_while(|(a, b)| a == b).count();
    let (t, m) = (&typed[prefix..], &meant[prefix..]);
    match t.len() as isize - m.len() as isize {
        0 => match (t, m) {
            ([a, rest_t @ ..], [b, rest_m @ ..]) if rest_t == rest_m => adjacent(*a, *b),
            ([a, b, rest_t @ ..], [c, d, rest_m @ ..]) => a == d && b == c && rest_t == rest_m,
            _ => false,
        },
        -1 => t == &m[1..],
        1 => t[1..] == *m && matches!(insertion(typed, prefix), INS_DOUBLE | INS_NEIGHBOUR),
        _ => false,
    }
}

/// −ln P(typed | meant) up to a constant, for lower-case ASCII words; `f32::INFINITY` when
/// either is empty or longer than 40 letters. Equal words cost 0.
pub fn cost(typed: &[u8], meant: &[u8]) -> f32 {
    cost_with_first_letter(typed, meant, FIRST_LETTER)
}

/// [`cost`] with `first_letter` as the extra cost of a slip at the first letter — a letter for
/// another, one left out, two swapped — where [`FIRST_LETTER`] is the rule. A letter typed before
/// the whole word (`vcenter`, `xpress`) always pays [`FIRST_LETTER`]: that is how names are made.
pub fn cost_with_first_letter(typed: &[u8], meant: &[u8], first_letter: f32) -> f32 {
    const MAX: usize = 40;
    let (n, m) = (meant.len(), typed.len());
    if n == 0 || m == 0 || n > MAX || m > MAX {
        return f32::INFINITY;
    }
    if typed == meant {
        return 0.0;
    }
    // Rows of the matrix, kept by `i % ROWS`: a rule looks back as many rows as its meant side
    // is long, so no other row is read.
    const ROWS: usize = 5;
    let mut d = [[f32::INFINITY; MAX + 1]; ROWS];
    let first = |i: usize| if i == 0 { first_letter } else { 0.0 };
    // What leaving out each meant letter and adding each typed letter costs, once.
    let mut del = [0.0f32; MAX];
    for (i, c) in del.iter_mut().enumerate().take(n) {
        *c = deletion(meant, i) + first(i);
    }
    let mut ins = [0.0f32; MAX];
    for (j, c) in ins.iter_mut().enumerate().take(m) {
        *c = insertion(typed, j) + if j == 0 { FIRST_LETTER } else { 0.0 };
    }
    // Only the rules whose two sides occur in the words can apply (at most eight, in order):
    // each as where its sides end in either word, bit `i` for the first `i` letters.
    let (meant_at, typed_at) = (Places::of(meant), Places::of(typed));
    let mut rules = [RuleAt::default(); 8];
    let mut active = 0;
    for (&(rm, rt, c), &(rm_letters, rt_letters)) in RULES.iter().zip(&RULE_LETTERS) {
        debug_assert!(rm.len() < ROWS);
        if active == rules.len() {
            break;
        }
        if rm_letters & !meant_at.letters != 0 || rt_letters & !typed_at.letters != 0 {
            continue;
        }
        let meant_ends = meant_at.ends(rm);
        if meant_ends == 0 {
            continue;
        }
        let typed_ends = typed_at.ends(rt);
        if typed_ends != 0 {
            rules[active] = RuleAt {
                meant_ends,
                typed_ends,
                meant_len: rm.len(),
                typed_len: rt.len(),
                cost: c,
            };
            active += 1;
        }
    }
    let rules = &rules[..active];
    let sub = substitution_table();
    // Row 0: the typed letters added before any meant one (no rule's meant side is empty).
    d[0][0] = 0.0;
    // (Half-open ranges: an inclusive one asks whether it is spent at every step.)
    for j in 1..m + 1 {
        d[0][j] = d[0][j - 1] + ins[j - 1];
    }
    for i in 1..n + 1 {
        let (row, up, up2) = (i % ROWS, (i + ROWS - 1) % ROWS, (i + ROWS - 2) % ROWS);
        let mi = meant[i - 1];
        let (sub_first, del_i) = (first(i - 1), del[i - 1]);
        // A rule is asked only on the rows where its meant side ends.
        let rules_end_here = rules.iter().any(|r| r.meant_ends >> i & 1 != 0);
        let rule_cells = |best: &mut f32, d: &[[f32; MAX + 1]; ROWS], j: usize| {
            for rule in rules {
                if rule.meant_ends >> i & 1 != 0 && rule.typed_ends >> j & 1 != 0 {
                    let (pi, pj) = (i - rule.meant_len, j - rule.typed_len);
                    lower(best, d[pi % ROWS][pj] + rule.cost + first(pi));
                }
            }
        };
        // Column 0: the meant letters left out before any typed one, or a rule with an empty
        // typed side.
        let mut best = d[up][0] + del_i;
        if rules_end_here {
            rule_cells(&mut best, &d, 0);
        }
        d[row][0] = best;
        // The letters the two- and three-letter edits ending on this row compare.
        let m2 = if i > 1 { Some(meant[i - 2]) } else { None };
        let m3 = if i > 2 { Some(meant[i - 3]) } else { None };
        for j in 1..m + 1 {
            let tj = typed[j - 1];
            let s = if mi == tj {
                0.0
            } else {
                substitution_in(sub, mi, tj) + sub_first
            };
            let mut best = d[up][j - 1] + s;
            lower(&mut best, d[up][j] + del_i);
            lower(&mut best, d[row][j - 1] + ins[j - 1]);
            if let Some(m2) = m2 {
                if j > 1 && mi == typed[j - 2] && m2 == tj && mi != m2 {
                    lower(
                        &mut best,
                        d[up2][j - 2] + TRANSPOSE + FIRST_SWAP_SHARE * first(i - 2),
                    );
                }
            }
            // Both three-letter rules end the typed side with one of the meant side's first two
            // letters (a letter moved) or an `e` (a silent `e`): most cells ask neither.
            if let (Some(m3), Some(m2)) = (m3, m2) {
                if j > 2 {
                    if (tj == m3 || tj == m2) && moved(&meant[i - 3..i], &typed[j - 3..j]) {
                        lower(&mut best, d[(i - 3) % ROWS][j - 3] + MOVE + first(i - 3));
                    }
                    if tj == b'e' && vowel_pair_as_silent_e(&meant[i - 3..i], &typed[j - 3..j]) {
                        lower(
                            &mut best,
                            d[(i - 3) % ROWS][j - 3] + VOWEL_PAIR_AS_SILENT_E + first(i - 3),
                        );
                    }
                }
            }
            if rules_end_here {
                rule_cells(&mut best, &d, j);
            }
            d[row][j] = best;
        }
    }
    d[n % ROWS][m]
}

/// `best` lowered to `cost` where that is less. The table's cells are sums of finite costs and
/// infinity, never NaN, so a plain comparison serves; `f32::min`'s care for NaN cost the cell
/// loop an eighth of its instructions.
#[inline(always)]
fn lower(best: &mut f32, cost: f32) {
    if cost < *best {
        *best = cost;
    }
}

/// Whether `typed` is the three letters `meant` with its first letter struck after the other
/// two or its last before them (`mke`/`kea`, `yea`/`rea`), and no swap of two of them.
fn moved(meant: &[u8], typed: &[u8]) -> bool {
    let (&[a, b, c], &[x, y, z]) = (meant, typed) else {
        return false;
    };
    a != b && b != c && a != c && (x == b && y == c && z == a || x == c && y == a && z == b)
}

/// A rule of [`RULES`] that applies to a pair of words: where its sides end in each.
#[derive(Clone, Copy, Default)]
struct RuleAt {
    meant_ends: u64,
    typed_ends: u64,
    meant_len: usize,
    typed_len: usize,
    cost: f32,
}

/// The letters a word holds, a bit each (anything else sets bit 31).
const fn letters_in(word: &[u8]) -> u32 {
    let mut m = 0;
    let mut i = 0;
    while i < word.len() {
        let c = word[i];
        m |= if c.is_ascii_lowercase() {
            1 << (c - b'a')
        } else {
            1 << 31
        };
        i += 1;
    }
    m
}

/// The letters of each side of each rule of [`RULES`] ([`letters_in`]), known when compiling:
/// a rule whose letters a word lacks is passed over without reading it.
const RULE_LETTERS: [(u32, u32); RULES.len()] = {
    let mut out = [(0, 0); RULES.len()];
    let mut k = 0;
    while k < RULES.len() {
        out[k] = (letters_in(RULES[k].0), letters_in(RULES[k].1));
        k += 1;
    }
    out
};

/// Where each lower-case letter stands in a word of at most 62 letters (a bit per place), and
/// the letters it holds ([`letters_in`]): a rule's side is found in the word with a shift per
/// letter of the side, not a scan of the word per rule.
struct Places {
    at: [u64; 26],
    letters: u32,
    len: usize,
}

impl Places {
    fn of(word: &[u8]) -> Self {
        debug_assert!(
            word.len() < 63,
            "the empty side's mask has a bit past the last letter"
        );
        let mut places = Places {
            at: [0; 26],
            letters: 0,
            len: word.len(),
        };
        for (i, &c) in word.iter().enumerate() {
            if c.is_ascii_lowercase() {
                places.at[usize::from(c - b'a')] |= 1 << i;
                places.letters |= 1 << (c - b'a');
            } else {
                places.letters |= 1 << 31;
            }
        }
        places
    }

    /// Bit `i` set where the word's first `i` letters end with `part` (lower-case letters);
    /// every bit up to the word's length for an empty `part`.
    fn ends(&self, part: &[u8]) -> u64 {
        if part.is_empty() {
            return (1 << (self.len + 1)) - 1;
        }
        // Bit `p` of `starts`: `part` is written from `p` on.
        let mut starts = (1 << self.len) - 1;
        for (k, &c) in part.iter().enumerate() {
            debug_assert!(c.is_ascii_lowercase());
            starts &= self.at[usize::from(c - b'a')] >> k;
        }
        starts << part.len()
    }
}

/// Calls `f` with each string a short typed word reads as when one slip of the hand that moves
/// letters further than a swap is undone: a letter struck two keys late or early (`mkea` →
/// `make`, `yrea` → `year`, [`MOVE`]), or both hands a key out of step, two pairs swapped
/// (`ahev` → `have`). A search of one edit finds neither.
pub fn rolled_keys(typed: &[u8], mut f: impl FnMut(&[u8])) {
    let n = typed.len();
    let mut buf = typed.to_vec();
    for i in 0..n.saturating_sub(2) {
        // Undo a letter struck two late: `typed[i + 2]` belongs at `i`; or two early.
        buf.copy_from_slice(typed);
        buf[i..i + 3].rotate_right(1);
        if moved(&buf[i..i + 3], &typed[i..i + 3]) {
            f(&buf);
        }
        buf.copy_from_slice(typed);
        buf[i..i + 3].rotate_left(1);
        if moved(&buf[i..i + 3], &typed[i..i + 3]) {
            f(&buf);
        }
    }
    for i in 0..n.saturating_sub(1) {
        for j in i + 2..n.saturating_sub(1) {
            if typed[i] != typed[i + 1] && typed[j] != typed[j + 1] {
                buf.copy_from_slice(typed);
                buf.swap(i, i + 1);
                buf.swap(j, j + 1);
                f(&buf);
            }
        }
    }
}

/// Calls `f` with each string `typed` reads as when one sound-alike spelling in it is read the
/// rules' way (`fone` → `phone`, `thear` → `there`) or a silent `e` as a vowel pair (`brane` →
/// `brain`, [`VOWEL_PAIR_AS_SILENT_E`]): the words a short word may be meant as, two or more
/// letters away, which no search of one edit finds.
pub fn respellings(typed: &[u8], mut f: impl FnMut(&[u8])) {
    let mut buf = Vec::with_capacity(typed.len() + 4);
    for &(rm, rt, _) in RULES.iter().filter(|r| !r.1.is_empty()) {
        for at in (0..=typed.len().saturating_sub(rt.len())).filter(|&i| typed[i..].starts_with(rt))
        {
            buf.clear();
            buf.extend_from_slice(&typed[..at]);
            buf.extend_from_slice(rm);
            buf.extend_from_slice(&typed[at + rt.len()..]);
            f(&buf);
        }
    }
    for at in 0..typed.len().saturating_sub(2) {
        for &(v, w) in VOWEL_PAIRS {
            let pair = [v, w, typed[at + 1]];
            if vowel_pair_as_silent_e(&pair, &typed[at..at + 3]) {
                buf.clear();
                buf.extend_from_slice(&typed[..at]);
                buf.extend_from_slice(&pair);
                buf.extend_from_slice(&typed[at + 3..]);
                f(&buf);
            }
        }
    }
}

/// The most letters the typed side of a sound-alike spelling has: [`RULES`]' longest, or the
/// three of a vowel pair spelt with a silent `e` ([`VOWEL_PAIR_AS_SILENT_E`]).
const LONGEST_TYPED_SPELLING: usize = {
    let mut most = 3;
    let mut k = 0;
    while k < RULES.len() {
        if RULES[k].1.len() > most {
            most = RULES[k].1.len();
        }
        k += 1;
    }
    most
};

/// Whether `meant` is `typed` with one sound-alike spelling read the rules' way (see
/// [`respellings`]): the writer spelt the word's sound.
pub fn is_respelling(typed: &[u8], meant: &[u8]) -> bool {
    // The spelling sits after the letters the words share at their start and before those
    // they share at their end: only there is it looked for.
    let same_start = typed.iter().zip(meant).take_while(|(a, b)| a == b).count();
    let same_end = typed
        .iter()
        .rev()
        .zip(meant.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    // The letters between those are what one spelling replaced, no more than the longest
    // typed side a spelling has (a silent `e` is three): most candidates differ more. A rule
    // holds each of them on its side (`letters_in` of each word's middle, none where the
    // shared ends overlap).
    if typed.len().saturating_sub(same_start + same_end) > LONGEST_TYPED_SPELLING {
        return false;
    }
    let middle = |w: &[u8]| {
        letters_in(
            w.get(same_start..w.len().saturating_sub(same_end))
                .unwrap_or_default(),
        )
    };
    let (typed_middle, meant_middle) = (middle(typed), middle(meant));
    // The places `at` where `typed[at..at + typed_part]` may differ from `meant`.
    let places = |typed_part: usize| {
        let last = typed.len().checked_sub(typed_part)?;
        Some(last.saturating_sub(same_end)..=last.min(same_start))
    };
    let silent_e = typed.len() == meant.len()
        && places(3).is_some_and(|mut at| {
            at.any(|at| vowel_pair_as_silent_e(&meant[at..at + 3], &typed[at..at + 3]))
        });
    silent_e
        || RULES
            .iter()
            .zip(&RULE_LETTERS)
            .filter(|(r, _)| !r.1.is_empty())
            .any(|(&(rm, rt, _), &(rm_letters, rt_letters))| {
                meant.len() + rt.len() == typed.len() + rm.len()
                    && typed_middle & !rt_letters == 0
                    && meant_middle & !rm_letters == 0
                    && places(rt.len()).is_some_and(|mut at| {
                        at.any(|at| holds_at(typed, at, rt) && holds_at(meant, at, rm))
                    })
            })
}

/// Whether `word` holds `part` from `at` on (a letter at a time: the parts are a few letters,
/// and this runs for every candidate).
fn holds_at(word: &[u8], at: usize, part: &[u8]) -> bool {
    word.get(at..at + part.len())
        .is_some_and(|w| w.iter().zip(part).all(|(a, b)| a == b))
}

/// Whether `typed` is `meant`, a word ending in a consonant and `-ies` or `-ied`, with its `y`
/// kept before the ending (`storys` for `stories`, `studyed` for `studied`): the form English
/// grammar asks for, spelt by the rule most words follow, which learners and children write
/// for every word. It is the word's form written wrong, not a name beside a word.
pub fn y_kept_before_ending(typed: &[u8], meant: &[u8]) -> bool {
    [(&b"ys"[..], &b"ies"[..]), (b"yed", b"ied")]
        .iter()
        .any(|&(t_end, m_end)| {
            typed.strip_suffix(t_end).is_some_and(|stem| {
                stem.len() >= 2
                    && !is_vowel(stem[stem.len() - 1])
                    && meant.strip_suffix(m_end) == Some(stem)
            })
        })
}

/// Damerau–Levenshtein distance (adjacent swaps count one, each letter edited once), capped:
/// any distance above `max` comes back as `max + 1`. This runs for every candidate the delete
/// index proposes; a caller comparing one word with many builds its [`DistancePattern`] once.
pub fn distance(a: &[u8], b: &[u8], max: u8) -> u8 {
    if a.len().abs_diff(b.len()) > usize::from(max) {
        return max.saturating_add(1);
    }
    match DistancePattern::new(a) {
        Some(pattern) => pattern.distance(b, max),
        None => distance_full(a, b, max),
    }
}

/// A word of at most 64 letters prepared for [`distance`] to many others: where each byte
/// occurs in it, as a bit mask, so that a comparison costs a few word operations per letter of
/// the other word (Hyyrö's bit-vector algorithm for the restricted Damerau distance, 2003)
/// instead of a row of the table.
pub struct DistancePattern<'a> {
    word: &'a [u8],
    /// Bit `i` of `at[c]` is set where `word[i] == c`.
    at: [u64; 256],
}

impl<'a> DistancePattern<'a> {
    /// The pattern of `word`, or `None` past 64 letters.
    pub fn new(word: &'a [u8]) -> Option<Self> {
        if word.len() > 64 {
            return None;
        }
        let mut at = [0u64; 256];
        for (i, &c) in word.iter().enumerate() {
            at[usize::from(c)] |= 1 << i;
        }
        Some(DistancePattern { word, at })
    }

    /// [`distance`] from the pattern's word to `other`.
    pub fn distance(&self, other: &[u8], max: u8) -> u8 {
        let cap = max.saturating_add(1);
        let n = self.word.len();
        if n.abs_diff(other.len()) > usize::from(max) {
            return cap;
        }
        if n == 0 {
            return u8::try_from(other.len()).map_or(cap, |d| d.min(cap));
        }
        // Column j of the table as vertical deltas: `vp`/`vn` mark rows one more/less than
        // the row above; `d0` marks the diagonal cells that equal their upper-left neighbour.
        let (mut vp, mut vn, mut d0, mut at_before) = (!0u64, 0u64, 0u64, 0u64);
        let last = 1u64 << (n - 1);
        let mut dist = n;
        for &c in other {
            let at = self.at[usize::from(c)];
            // A swap: this letter matches the row below where the last letter matched, at a
            // cell the diagonal did not already reach at no cost.
            let swap = ((!d0 & at) << 1) & at_before;
            d0 = (((at & vp).wrapping_add(vp)) ^ vp) | at | vn | swap;
            let hp = vn | !(d0 | vp);
            let hn = d0 & vp;
            if hp & last != 0 {
                dist += 1;
            }
            if hn & last != 0 {
                dist -= 1;
            }
            let hp = (hp << 1) | 1;
            let hn = hn << 1;
            vp = hn | !(d0 | hp);
            vn = hp & d0;
            at_before = at;
        }
        u8::try_from(dist).map_or(cap, |d| d.min(cap))
    }
}

/// [`distance`] over the whole table: for words past 64 letters, and the tests' reference.
fn distance_full(a: &[u8], b: &[u8], max: u8) -> u8 {
    let cap = usize::from(max) + 1;
    let (n, m) = (a.len(), b.len());
    let w = m + 1;
    let mut d = vec![0usize; (n + 1) * w];
    for i in 0..=n {
        d[i * w] = i;
    }
    for (j, v) in d.iter_mut().enumerate().take(m + 1) {
        *v = j;
    }
    for i in 1..=n {
        let mut row_min = usize::MAX;
        for j in 1..=m {
            let sub = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j - 1] + sub)
                .min(d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
            row_min = row_min.min(v);
        }
        if row_min.min(d[i * w]) >= cap {
            return max + 1;
        }
    }
    d[n * w + m].min(cap) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bit_vector_distance_is_the_full_tables() {
        use proptest::prelude::*;
        // Every pair of words of up to five letters over three (repeats, swaps, runs), each cap.
        let mut words: Vec<Vec<u8>> = vec![Vec::new()];
        for len in 1..=5 {
            let mut w = vec![b'a'; len];
            loop {
                words.push(w.clone());
                let Some(k) = w.iter().rposition(|&c| c != b'c') else {
                    break;
                };
                w[k] += 1;
                w[k + 1..].fill(b'a');
            }
        }
        for a in &words {
            let pattern = DistancePattern::new(a).expect("short");
            for b in &words {
                for max in [0, 1, 2, 3, 6] {
                    let want = distance_full(a, b, max);
                    assert_eq!(pattern.distance(b, max), want, "{a:?} {b:?} {max}");
                    assert_eq!(distance(a, b, max), want, "{a:?} {b:?} {max}");
                }
            }
        }
        // Longer words, up to the pattern's 64 letters, and past them.
        let word = proptest::collection::vec(prop::sample::select(b"abcde".to_vec()), 0..70);
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&(word.clone(), word, 0u8..8), |(a, b, max)| {
                prop_assert_eq!(distance(&a, &b, max), distance_full(&a, &b, max));
                Ok(())
            })
            .unwrap();
        let long = vec![b'a'; 80];
        assert_eq!(distance(&long, &long[..79], 2), 1);
        assert_eq!(distance(&long[..64], &long[..63], u8::MAX), 1);
        assert_eq!(distance(b"", b"abc", 2), 3);
        assert_eq!(distance(b"abc", b"", 5), 3);
    }

    /// Bit `i` set where the first `i` letters of `word` (at most 63) end with `part`; every bit
    /// up to the word's length for an empty `part`.
    fn ends_of(word: &[u8], part: &[u8]) -> u64 {
        let k = part.len();
        (k..=word.len().min(63))
            .filter(|&i| holds_at(word, i - k, part))
            .fold(0, |m, i| m | 1 << i)
    }

    /// [`cost_with_first_letter`] as the plain table computes it, every cell asking every
    /// edit: what the row-by-row alignment must match to the bit.
    fn cost_full(typed: &[u8], meant: &[u8], first_letter: f32) -> f32 {
        const MAX: usize = 40;
        let (n, m) = (meant.len(), typed.len());
        if n == 0 || m == 0 || n > MAX || m > MAX {
            return f32::INFINITY;
        }
        if typed == meant {
            return 0.0;
        }
        // Rows of the matrix, kept by `i % ROWS`: a rule looks back as many rows as its meant side
        // is long, so no other row is read.
        const ROWS: usize = 5;
        let mut d = [[f32::INFINITY; MAX + 1]; ROWS];
        let first = |i: usize| if i == 0 { first_letter } else { 0.0 };
        // What leaving out each meant letter and adding each typed letter costs, once.
        let mut del = [0.0f32; MAX];
        for (i, c) in del.iter_mut().enumerate().take(n) {
            *c = deletion(meant, i) + first(i);
        }
        let mut ins = [0.0f32; MAX];
        for (j, c) in ins.iter_mut().enumerate().take(m) {
            *c = insertion(typed, j) + if j == 0 { FIRST_LETTER } else { 0.0 };
        }
        // Only the rules whose two sides occur in the words can apply (at most eight, in order):
        // each as where its sides end in either word, bit `i` for the first `i` letters.
        let (meant_letters, typed_letters) = (letters_in(meant), letters_in(typed));
        let mut rules = [RuleAt::default(); 8];
        let mut active = 0;
        for (&(rm, rt, c), &(rm_letters, rt_letters)) in RULES.iter().zip(&RULE_LETTERS) {
            debug_assert!(rm.len() < ROWS);
            if active == rules.len() {
                break;
            }
            if rm_letters & !meant_letters != 0 || rt_letters & !typed_letters != 0 {
                continue;
            }
            let (meant_ends, typed_ends) = (ends_of(meant, rm), ends_of(typed, rt));
            if meant_ends != 0 && typed_ends != 0 {
                rules[active] = RuleAt {
                    meant_ends,
                    typed_ends,
                    meant_len: rm.len(),
                    typed_len: rt.len(),
                    cost: c,
                };
                active += 1;
            }
        }
        let rules = &rules[..active];
        for i in 0..=n {
            let (row, up, up2) = (i % ROWS, (i + ROWS - 1) % ROWS, (i + ROWS - 2) % ROWS);
            for j in 0..=m {
                if i == 0 && j == 0 {
                    d[0][0] = 0.0;
                    continue;
                }
                let mut best = f32::INFINITY;
                if i > 0 && j > 0 {
                    let s = if meant[i - 1] == typed[j - 1] {
                        0.0
                    } else {
                        substitution_in(substitution_table(), meant[i - 1], typed[j - 1])
                            + first(i - 1)
                    };
                    lower(&mut best, d[up][j - 1] + s);
                }
                if i > 0 {
                    lower(&mut best, d[up][j] + del[i - 1]);
                }
                if j > 0 {
                    lower(&mut best, d[row][j - 1] + ins[j - 1]);
                }
                if i > 1
                    && j > 1
                    && meant[i - 1] == typed[j - 2]
                    && meant[i - 2] == typed[j - 1]
                    && meant[i - 1] != meant[i - 2]
                {
                    lower(
                        &mut best,
                        d[up2][j - 2] + TRANSPOSE + FIRST_SWAP_SHARE * first(i - 2),
                    );
                }
                // Both three-letter rules end the typed side with one of the meant side's first two
                // letters (a letter moved) or an `e` (a silent `e`): most cells ask neither.
                if i > 2 && j > 2 {
                    let z = typed[j - 1];
                    if (z == meant[i - 3] || z == meant[i - 2])
                        && moved(&meant[i - 3..i], &typed[j - 3..j])
                    {
                        lower(&mut best, d[(i - 3) % ROWS][j - 3] + MOVE + first(i - 3));
                    }
                    if z == b'e' && vowel_pair_as_silent_e(&meant[i - 3..i], &typed[j - 3..j]) {
                        lower(
                            &mut best,
                            d[(i - 3) % ROWS][j - 3] + VOWEL_PAIR_AS_SILENT_E + first(i - 3),
                        );
                    }
                }
                for rule in rules {
                    if rule.meant_ends >> i & 1 != 0 && rule.typed_ends >> j & 1 != 0 {
                        let (pi, pj) = (i - rule.meant_len, j - rule.typed_len);
                        lower(&mut best, d[pi % ROWS][pj] + rule.cost + first(pi));
                    }
                }
                d[row][j] = best;
            }
        }
        d[n % ROWS][m]
    }

    #[test]
    fn a_words_places_find_a_part_where_a_scan_does() {
        use proptest::prelude::*;
        let word = proptest::collection::vec(prop::sample::select(b"abc-".to_vec()), 0..41);
        let part = proptest::collection::vec(prop::sample::select(b"abc".to_vec()), 0..5);
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&(word, part), |(w, p)| {
                prop_assert_eq!(Places::of(&w).ends(&p), ends_of(&w, &p), "{:?} {:?}", w, p);
                Ok(())
            })
            .unwrap();
        for (rm, rt, _) in RULES {
            for w in [&b"phones"[..], b"fisics", b"knight", b"though", b"a"] {
                assert_eq!(Places::of(w).ends(rm), ends_of(w, rm));
                assert_eq!(Places::of(w).ends(rt), ends_of(w, rt));
            }
        }
    }

    #[test]
    fn the_alignment_is_the_full_tables() {
        use proptest::prelude::*;
        // Letters the rules and the slips use, so that most pairs hold a rule's sides, a
        // doubling, a swap or a silent `e`; past the 40 letters, too.
        let word =
            proptest::collection::vec(prop::sample::select(b"aeiosyhckwgtfnrpx-".to_vec()), 0..44);
        let short = proptest::collection::vec(prop::sample::select(b"aeuihgkctso".to_vec()), 0..9);
        let mut runner = proptest::test_runner::TestRunner::new_with_rng(
            ProptestConfig::with_cases(4000),
            proptest::test_runner::TestRng::deterministic_rng(
                proptest::test_runner::RngAlgorithm::ChaCha,
            ),
        );
        for first in [FIRST_LETTER, 0.0, 0.7] {
            runner
                .run(&(word.clone(), word.clone()), |(t, m)| {
                    let (got, want) = (
                        cost_with_first_letter(&t, &m, first),
                        cost_full(&t, &m, first),
                    );
                    prop_assert_eq!(got.to_bits(), want.to_bits(), "{:?} {:?}", t, m);
                    Ok(())
                })
                .unwrap();
            runner
                .run(&(short.clone(), short.clone()), |(t, m)| {
                    let (got, want) = (
                        cost_with_first_letter(&t, &m, first),
                        cost_full(&t, &m, first),
                    );
                    prop_assert_eq!(got.to_bits(), want.to_bits(), "{:?} {:?}", t, m);
                    Ok(())
                })
                .unwrap();
        }
        for (t, m) in [
            ("fisics", "physics"),
            ("brane", "brain"),
            ("mkea", "make"),
            ("nite", "night"),
            ("thru", "through"),
            ("ahev", "have"),
        ] {
            let (t, m) = (t.as_bytes(), m.as_bytes());
            assert_eq!(
                cost(t, m).to_bits(),
                cost_full(t, m, FIRST_LETTER).to_bits()
            );
        }
    }

    #[test]
    fn a_respelling_is_exactly_what_respellings_make() {
        use proptest::prelude::*;
        // Letters the rules use, so that most words hold a rule's side.
        let word =
            proptest::collection::vec(prop::sample::select(b"aeiosyhckwgtfn".to_vec()), 0..9);
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&(word.clone(), word), |(typed, other)| {
                let mut made = Vec::new();
                respellings(&typed, |m| made.push(m.to_vec()));
                for m in &made {
                    prop_assert!(is_respelling(&typed, m), "{typed:?} {m:?}");
                }
                prop_assert_eq!(is_respelling(&typed, &other), made.contains(&other));
                Ok(())
            })
            .unwrap();
    }

    fn c(typed: &str, meant: &str) -> f32 {
        cost(typed.as_bytes(), meant.as_bytes())
    }

    #[test]
    fn common_human_errors_cost_less_than_unrelated_ones() {
        assert_eq!(c("word", "word"), 0.0);
        // A doubled letter dropped is the cheapest error; a vowel swap next.
        assert!(c("accomodate", "accommodate") < c("acckmmodate", "accommodate"));
        assert!(c("seperate", "separate") < c("sekarate", "separate"));
        assert!(c("definately", "definitely") < c("definitxly", "definitely"));
        // Swapped letters are one cheap edit, not two.
        assert!(c("recieve", "receive") < 2.0 * SUB_VOWEL);
        assert!(c("teh", "the") <= TRANSPOSE + FIRST_LETTER);
        // Without the first-letter cost a slip there costs what it does elsewhere, but a letter
        // typed before the whole word still pays it.
        let free = |t: &str, m: &str| cost_with_first_letter(t.as_bytes(), m.as_bytes(), 0.0);
        assert_eq!(free("wxons", "exons") + FIRST_LETTER, c("wxons", "exons"));
        assert_eq!(free("hsarks", "sharks"), TRANSPOSE);
        assert_eq!(free("vcenter", "center"), c("vcenter", "center"));
        // Sound-alike spellings.
        assert!(c("fisics", "physics") < c("xisics", "physics"));
        // A vowel sound spelt the other way is likelier than a doubled vowel, which changes the
        // sound; a doubled consonant does not.
        assert!(c("meen", "mean") < c("meen", "men"));
        assert!(c("untill", "until") < c("meen", "men"));
        assert_eq!(c("meen", "men"), INS_VOWEL_PAIR);
        // A vowel struck once more where it is doubled already is a stutter of the key.
        assert_eq!(c("speeed", "speed"), INS_DOUBLE_VOWEL);
        assert_eq!(c("goood", "good"), INS_DOUBLE_VOWEL);
        assert!(c("speeed", "speed") < c("meen", "men"));
        assert!(c("chose", "choose") > c("ocured", "occured"));
        // A silent final `e` dropped is as cheap as a doubled consonant; a sounded vowel is not.
        assert_eq!(c("befor", "before"), DEL_SILENT_E);
        assert!(c("befor", "before") < c("definitly", "definitely"));
        assert!(c("fre", "free") > DEL_SILENT_E);
        // A consonant a cluster blurs is dropped more often than one beside a vowel.
        assert_eq!(c("lengh", "length"), DEL_CLUSTER);
        assert_eq!(c("goverment", "government"), DEL_CLUSTER);
        assert_eq!(c("govenment", "government"), DEL_OTHER);
        // The first letter is rarely wrong.
        assert!(c("bat", "cat") > c("cab", "cat"));
        // Keyboard neighbours are likelier than far keys.
        assert!(
            c("hearr", "heart") < c("hearq", "heart") + 1e-6
                || c("hearr", "heart") <= c("hearq", "heart")
        );
        assert!(c("heaet", "heart") < c("heamt", "heart"));
        assert!(c("", "a").is_infinite());
    }

    #[test]
    fn a_sound_spelt_another_way_is_read_the_rules_way() {
        let all = |typed: &str| {
            let mut v = Vec::new();
            respellings(typed.as_bytes(), |s| {
                v.push(String::from_utf8_lossy(s).into_owned())
            });
            v
        };
        assert!(all("thear").contains(&"there".to_string()));
        assert!(all("nite").contains(&"night".to_string()));
        assert!(all("fone").contains(&"phone".to_string()));
        assert!(all("kwik").contains(&"quik".to_string()));
        // Each occurrence on its own.
        assert!(all("feefee").contains(&"feafee".to_string()));
        assert!(all("feefee").contains(&"feefea".to_string()));
        assert!(all("bmp").is_empty());
        assert!(is_respelling(b"thear", b"there"));
        assert!(!is_respelling(b"thear", b"their"));
        // A silent `e` read as the vowel pair the word spells the sound with.
        assert!(all("brane").contains(&"brain".to_string()));
        assert!(all("lones").contains(&"loans".to_string()));
        assert!(all("speke").contains(&"speak".to_string()));
        assert!(all("speke").contains(&"speek".to_string()));
        assert!(is_respelling(b"frute", b"fruit"));
        // `aw` for `au`, `k` for a Greek `ch`, `-ys` for `-ies`.
        assert!(is_respelling(b"fawcet", b"faucet"));
        assert!(is_respelling(b"stomak", b"stomach"));
        assert!(is_respelling(b"citys", b"cities"));
        assert!(is_respelling(b"studyed", b"studied"));
        assert!(c("tryed", "tried") < c("tryes", "tries"));
        // The `y` kept before an ending after a consonant, not after a vowel (`plays`).
        assert!(y_kept_before_ending(b"storys", b"stories"));
        assert!(y_kept_before_ending(b"tryed", b"tried"));
        assert!(!y_kept_before_ending(b"plays", b"plaies"));
        assert!(!y_kept_before_ending(b"ys", b"ies"));
        assert!(!y_kept_before_ending(b"storys", b"stores"));
        assert!(all("skool").contains(&"school".to_string()));
        assert!(c("fawcet", "faucet") < c("fancet", "faucet"));
        // The `s` sound before `e` spelt with the other letter, priced as the letters' own
        // substitution.
        assert!(is_respelling(b"sence", b"sense"));
        assert!(is_respelling(b"choise", b"choice"));
        assert!(!is_respelling(b"sence", b"since"));
        assert_eq!(c("sence", "sense"), SUB_PHONETIC);
        assert!(!is_respelling(b"brane", b"brian"));
        assert!(!is_respelling(b"brae", b"brai"));
        // The same strings `respellings` makes, and no others.
        for typed in [
            "thear", "nite", "fone", "kwik", "feefee", "bmp", "x", "brane", "lones",
        ] {
            let mut made = Vec::new();
            respellings(typed.as_bytes(), |s| made.push(s.to_vec()));
            for m in &made {
                assert!(is_respelling(typed.as_bytes(), m), "{typed}");
            }
            for other in [
                "there", "night", "phone", "quick", "fefee", "bump", "", "brain", "loans",
            ] {
                let other = other.as_bytes();
                assert_eq!(
                    is_respelling(typed.as_bytes(), other),
                    made.iter().any(|m| m == other)
                );
            }
        }
        // An ending's unstressed vowel, either way, is one sound; a vowel elsewhere is a letter.
        assert!(is_respelling(b"independant", b"independent"));
        assert!(is_respelling(b"existance", b"existence"));
        assert!(is_respelling(b"responsable", b"responsible"));
        assert!(is_respelling(b"ignorent", b"ignorant"));
        assert!(!is_respelling(b"seperate", b"separate"));
        // And the rule prices it as one sound, not two letters.
        assert!(c("thear", "there") < DEL_OTHER + INS_VOWEL);
        assert_eq!(c("brane", "brain"), VOWEL_PAIR_AS_SILENT_E);
        assert_eq!(c("lones", "loans"), VOWEL_PAIR_AS_SILENT_E);
        assert!(c("brane", "brain") < DEL_VOWEL + INS_VOWEL);
    }

    #[test]
    fn a_letter_struck_two_keys_away_is_one_slip_and_is_undone() {
        let all = |typed: &str| {
            let mut v = Vec::new();
            rolled_keys(typed.as_bytes(), |s| {
                v.push(String::from_utf8_lossy(s).into_owned())
            });
            v
        };
        // Late, early, and two pairs out of step.
        assert!(all("mkea").contains(&"make".to_string()));
        assert!(all("jstu").contains(&"just".to_string()));
        assert!(all("yrea").contains(&"year".to_string()));
        assert!(all("lveo").contains(&"love".to_string()));
        assert!(all("ahev").contains(&"have".to_string()));
        assert!(all("owudl").contains(&"would".to_string()));
        // Never the word itself, and nothing from a word too short to move a letter in.
        assert!(!all("make").contains(&"make".to_string()));
        assert!(all("ab").is_empty());
        // One move costs less than the letter dropped and added that it replaces, more than a
        // swap, and a move at the first letter pays that letter's cost.
        assert_eq!(c("mkea", "make"), MOVE);
        assert_eq!(c("soilders", "soldiers"), MOVE);
        assert!(c("jstu", "just") < DEL_VOWEL + INS_VOWEL);
        assert!(c("tath", "that") > TRANSPOSE);
        assert_eq!(c("tath", "that"), MOVE);
        // The first two letters swapped pay half the first letter's cost.
        assert_eq!(
            c("rwite", "write"),
            TRANSPOSE + FIRST_SWAP_SHARE * FIRST_LETTER
        );
        assert!(c("rwite", "write") < c("ewite", "write"));
        assert_eq!(c("yrea", "year"), MOVE);
        assert_eq!(c("eayr", "year"), MOVE + FIRST_LETTER);
    }

    #[test]
    fn slips_of_the_hand_are_told_from_slips_of_spelling() {
        let slip = |t: &str, m: &str| slip_of_the_hand(t.as_bytes(), m.as_bytes());
        // Swapped, a neighbouring key, a letter left out, a neighbouring key added.
        assert!(slip("dose", "does"));
        assert!(slip("form", "from"));
        assert!(slip("hoe", "how"));
        assert!(slip("fro", "from"));
        assert!(slip("thhe", "the"));
        assert!(slip("tghe", "the"));
        // A vowel for a vowel, a far key, a letter added far from its neighbours.
        assert!(!slip("net", "not"));
        assert!(!slip("car", "can"));
        assert!(!slip("cain", "can"));
        assert!(!slip("ball", "all"));
        assert!(!slip("the", "the"));
        assert!(!slip("thee", "th"));
    }

    #[test]
    fn distance_counts_swaps_as_one_and_caps() {
        assert_eq!(distance(b"recieve", b"receive", 2), 1);
        assert_eq!(distance(b"abc", b"abc", 2), 0);
        assert_eq!(distance(b"kitten", b"sitting", 2), 3);
        assert_eq!(distance(b"a", b"abcdef", 2), 3);
        assert_eq!(distance(b"ab", b"ba", 1), 1);
    }
}
