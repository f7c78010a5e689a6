//! Measuring repair on errors people make: inject one error per clean query, repair, and count
//! what came back (`capot repair eval`).

use serde::Serialize;

use super::{Repairer, RetrievedWords};
use crate::eval::metrics::cosine;

/// What a query as typed retrieves, for the index's vote (`None`: no vote).
pub type Retrieve<'a> = dyn Fn(&str) -> Option<RetrievedWords> + 'a;
use crate::noise::human::{self, Injected, Misspellings};
use crate::noise::NoiseRng;

/// Which errors to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Injection {
    /// A real misspelling from a list.
    Misspell,
    /// A real word one slip from the meant one.
    RealWord,
    /// Two words joined or one split.
    Boundary,
}

impl Injection {
    /// The name used as the noise kind in the generator's seed.
    pub fn as_str(self) -> &'static str {
        match self {
            Injection::Misspell => "misspell",
            Injection::RealWord => "realword",
            Injection::Boundary => "boundary",
        }
    }
}

/// What repair did on one set of injected queries.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InjectionReport {
    /// Queries that could take an error.
    pub queries: usize,
    /// Errors corrected: the meant word back in place (for boundaries: the whole query back).
    pub restored: usize,
    /// Other words of those queries.
    pub other_words: usize,
    /// Other words that repair changed.
    pub other_changed: usize,
    /// restored / queries.
    pub restored_rate: f64,
    /// other_changed / other_words.
    pub other_changed_rate: f64,
    /// The first queries that were not restored, as many as [`injected`] was asked to keep:
    /// (clean, noisy, repaired).
    pub misses: Vec<(String, String, String)>,
    /// The first queries where another word changed, as many: (clean, noisy, repaired).
    pub collateral: Vec<(String, String, String)>,
    /// How near the typed and the repaired queries' encodings come to the clean ones', when
    /// measured ([`meaning`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meaning: Option<Meaning>,
    /// Every query that took an error: (clean, noisy, repaired), for [`meaning`].
    #[serde(skip)]
    pub all: Vec<(String, String, String)>,
}

/// How much of a query's meaning an error takes and repair brings back: the mean cosine between
/// the clean query's encoding and the typed (noisy) one's, and the repaired one's (TREC DL-typo's
/// measure of how far a typo moves a query; 1 where the text is the clean text).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Meaning {
    /// Queries measured.
    pub queries: usize,
    /// Mean cosine of the typed query to the clean one.
    pub typed: f64,
    /// Mean cosine of the repaired query to the clean one.
    pub repaired: f64,
}

/// Encodings of texts, one vector each (an encoder's `encode`).
pub type Embed<'a, E> = dyn Fn(&[&str]) -> Result<Vec<Vec<f32>>, E> + 'a;

/// Texts encoded at once by [`meaning`].
const MEANING_BATCH: usize = 64;

/// The [`Meaning`] of (clean, typed, repaired) triples under `embed`, each distinct text encoded
/// once.
pub fn meaning<E: From<crate::eval::EvalError>>(
    triples: &[(String, String, String)],
    embed: &Embed<'_, E>,
) -> Result<Meaning, E> {
    let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut texts: Vec<&str> = Vec::new();
    for (c, t, r) in triples {
        for x in [c, t, r] {
            at.entry(x.as_str()).or_insert_with(|| {
                texts.push(x.as_str());
                texts.len() - 1
            });
        }
    }
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(MEANING_BATCH) {
        vectors.extend(embed(batch)?);
    }
    let vector = |x: &str| at.get(x).and_then(|&i| vectors.get(i));
    let mut m = Meaning::default();
    for (c, t, r) in triples {
        let (Some(c), Some(t), Some(r)) = (vector(c), vector(t), vector(r)) else {
            continue;
        };
        m.typed += cosine(c, t)?;
        m.repaired += cosine(c, r)?;
        m.queries += 1;
    }
    if m.queries > 0 {
        m.typed /= m.queries as f64;
        m.repaired /= m.queries as f64;
    }
    Ok(m)
}

/// What repair did to clean queries.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CleanReport {
    /// Clean queries repaired.
    pub queries: usize,
    /// Of which changed at all.
    pub changed: usize,
    /// changed / queries.
    pub changed_rate: f64,
    /// Every change: (query, repaired).
    pub changes: Vec<(String, String)>,
}

/// Lower-case letter words of a text, for comparing queries word by word.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Which of `a`'s words are kept in `b`, by a longest common subsequence.
fn kept(a: &[String], b: &[String]) -> Vec<bool> {
    let (n, m) = (a.len(), b.len());
    let mut l = vec![0u16; (n + 1) * (m + 1)];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            l[i * (m + 1) + j] = if a[i] == b[j] {
                l[(i + 1) * (m + 1) + j + 1] + 1
            } else {
                l[(i + 1) * (m + 1) + j].max(l[i * (m + 1) + j + 1])
            };
        }
    }
    let mut out = vec![false; n];
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if a[i] == b[j] {
            out[i] = true;
            i += 1;
            j += 1;
        } else if l[(i + 1) * (m + 1) + j] >= l[i * (m + 1) + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// How many misses and collateral changes a report keeps per set of errors unless asked
/// otherwise (`capot repair eval --examples`).
pub const EXAMPLES: usize = 200;

/// Injects one error into each query (`(id, text)`) under `seed`, repairs it and scores it,
/// keeping the first `examples` misses and collateral changes.
pub fn injected(
    repairer: &Repairer,
    queries: &[(String, String)],
    injection: Injection,
    misspellings: Option<&Misspellings>,
    seed: u64,
    retrieve: &Retrieve<'_>,
    examples: usize,
) -> InjectionReport {
    let neighbours = |w: &str| repairer.real_word_neighbours(w);
    let mut r = InjectionReport::default();
    for (id, clean) in queries {
        let mut rng = NoiseRng::for_query(seed, injection.as_str(), id, 0);
        let inj: Option<Injected> = match injection {
            Injection::Misspell => misspellings.and_then(|m| human::misspell(m, &mut rng, clean)),
            Injection::RealWord => human::realword(&mut rng, clean, &neighbours),
            Injection::Boundary => human::boundary(&mut rng, clean),
        };
        let Some(inj) = inj else { continue };
        r.queries += 1;
        let repaired = repairer
            .repair_with(&inj.text, &|_| false, retrieve(&inj.text).as_ref())
            .text;
        let (cw, rw) = (words(clean), words(&repaired));
        let triple = || (clean.clone(), inj.text.clone(), repaired.clone());
        r.all.push(triple());
        match injection {
            Injection::Boundary => {
                if cw == rw {
                    r.restored += 1;
                } else if r.misses.len() < examples {
                    r.misses.push(triple());
                }
            }
            _ => {
                // The injected token is one word of the clean query (plain letters).
                let target = clean
                    .split_whitespace()
                    .nth(inj.token)
                    .map(str::to_lowercase)
                    .unwrap_or_default();
                let at = words_before_token(clean, inj.token);
                let k = kept(&cw, &rw);
                if k.get(at).copied().unwrap_or(false) && cw.get(at) == Some(&target) {
                    r.restored += 1;
                } else if r.misses.len() < examples {
                    r.misses.push(triple());
                }
                let others = k.iter().enumerate().filter(|(i, _)| *i != at);
                let (mut n, mut changed) = (0, 0);
                for (_, kept) in others {
                    n += 1;
                    changed += usize::from(!kept);
                }
                r.other_words += n;
                r.other_changed += changed;
                if changed > 0 && r.collateral.len() < examples {
                    r.collateral.push(triple());
                }
            }
        }
    }
    r.restored_rate = r.restored as f64 / r.queries.max(1) as f64;
    r.other_changed_rate = r.other_changed as f64 / r.other_words.max(1) as f64;
    r
}

/// Number of letter words of `text` before its whitespace token `token`.
fn words_before_token(text: &str, token: usize) -> usize {
    text.split_whitespace()
        .take(token)
        .map(|t| words(t).len())
        .sum()
}

/// Repairs clean queries and counts those it changed.
pub fn clean(
    repairer: &Repairer,
    queries: &[(String, String)],
    retrieve: &Retrieve<'_>,
) -> CleanReport {
    let mut r = CleanReport::default();
    for (_, q) in queries {
        r.queries += 1;
        let out = repairer.repair_with(q, &|_| false, retrieve(q).as_ref());
        if out.changed() {
            r.changed += 1;
            r.changes.push((q.clone(), out.text));
        }
    }
    r.changed_rate = r.changed as f64 / r.queries.max(1) as f64;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_keeps_as_many_misses_as_asked_and_counts_them_all() {
        // No vocabulary: no joined or split word is put back, every query is a miss.
        let vocab = crate::index::vocab::Vocabulary::build(std::iter::empty::<(&str, &str)>());
        let repairer = Repairer::new(std::sync::Arc::new(vocab), None);
        let queries: Vec<(String, String)> = (0..6)
            .map(|i| (format!("q{i}"), "cheap flights to paris france".to_string()))
            .collect();
        let report = |examples| {
            injected(
                &repairer,
                &queries,
                Injection::Boundary,
                None,
                0,
                &|_| None,
                examples,
            )
        };
        let all = report(usize::MAX);
        assert_eq!(all.queries, 6);
        assert_eq!(all.restored, 0);
        assert_eq!(all.misses.len(), 6);
        let two = report(2);
        assert_eq!((two.queries, two.restored, two.misses.len()), (6, 0, 2));
        assert_eq!(two.misses[..], all.misses[..2]);
    }

    #[test]
    fn kept_words_follow_the_longest_common_subsequence() {
        let a = words("acid reflux symptoms");
        assert_eq!(kept(&a, &words("acid reflux symptoms")), [true, true, true]);
        assert_eq!(
            kept(&a, &words("acid reflex symptoms")),
            [true, false, true]
        );
        assert_eq!(kept(&a, &words("acid symptoms")), [true, false, true]);
        assert_eq!(words_before_token("what's the co-pay", 2), 3);
    }

    /// Letter counts: texts with the same letters point the same way.
    fn letters(texts: &[&str]) -> Result<Vec<Vec<f32>>, crate::eval::EvalError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 26];
                for b in t.bytes().filter(u8::is_ascii_lowercase) {
                    v[usize::from(b - b'a')] += 1.0;
                }
                v
            })
            .collect())
    }

    #[test]
    fn meaning_is_the_mean_cosine_to_the_clean_query_each_text_encoded_once() {
        let t = |c: &str, n: &str, r: &str| (c.to_string(), n.to_string(), r.to_string());
        // Restored: 1 repaired; `ab` for `aa` is cos 1/√2 typed; a swap keeps every letter.
        let triples = [
            t("aa", "ab", "aa"),
            t("aa", "ab", "ab"),
            t("ba", "ab", "ab"),
        ];
        let seen = std::cell::RefCell::new(Vec::new());
        let embed = |texts: &[&str]| {
            seen.borrow_mut()
                .extend(texts.iter().map(|x| x.to_string()));
            letters(texts)
        };
        let m = meaning(&triples, &embed).unwrap();
        let half = std::f64::consts::FRAC_1_SQRT_2;
        assert_eq!(m.queries, 3);
        assert!((m.typed - (2.0 * half + 1.0) / 3.0).abs() < 1e-9, "{m:?}");
        assert!(
            (m.repaired - (1.0 + half + 1.0) / 3.0).abs() < 1e-9,
            "{m:?}"
        );
        let mut once = seen.borrow().clone();
        once.sort();
        assert_eq!(once, ["aa", "ab", "ba"]);
        // An encoder that fails fails the measure.
        let failing = |_: &[&str]| -> Result<Vec<Vec<f32>>, crate::eval::EvalError> {
            Err(crate::eval::EvalError::Retrieval("down".into()))
        };
        assert!(meaning(&triples, &failing).is_err());
        assert_eq!(meaning(&[], &failing).unwrap(), Meaning::default());
    }
}
