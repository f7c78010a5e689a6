//! The decoder: the most likely meant query given the typed one, by Viterbi search over each
//! word's readings (as typed, a non-word or real-word correction, a split, a join with the next
//! word), scored by the error model and the language model.

use super::candidates::MAX_EDITS;
use super::error_model::{self, JOIN};
use super::language_model::WordStats;
use super::query::{defined_word, QueryWord, MIN_CONTEXT_CHARS};
use super::retrieved::RetrievedWords;
use super::{ln_usage, EditKind, Repairer};
use crate::index::vocab::{is_stopword, STOPWORDS};
use compact_str::CompactString;
use smallvec::{smallvec, SmallVec};

/// The words a [`Reading`] means, each with what the model knows of it. A query's readings are
/// built by the dozen and most are dropped: a reading of one word of up to 24 bytes, nearly
/// every one, needs no allocation.
pub(crate) type MeantWords = SmallVec<[(CompactString, WordStats); 1]>;

/// One way to read the words at a position.
#[derive(Debug, Clone)]
pub(crate) struct Reading {
    /// Query words it covers (1, or 2 for a join).
    pub span: usize,
    /// The meant words (1, or 2 for a split), lower case.
    pub words: MeantWords,
    /// −ln P(typed | meant), plus the prior cost of changing a known word.
    pub cost: f64,
    /// `None` when read as typed.
    pub kind: Option<EditKind>,
    /// Letter edits between typed and meant (0 when as typed; 1 for a split or a join).
    pub distance: u8,
}

/// A word's candidates within 0, 1 and 2 edits, as (candidate id, distance), once looked up.
type Found = [Option<Vec<(u32, u8)>>; 3];

/// The candidate look-ups of one repair, kept across its passes: the second pass, which checks
/// that the repaired text is a fixed point, reads mostly the same words.
#[derive(Default)]
pub(crate) struct Lookups {
    /// Per typed word, the candidates within 0, 1 and 2 edits, once looked up.
    found: std::collections::HashMap<Box<str>, Found, foldhash::fast::FixedState>,
}

impl Lookups {
    /// The words of `r`'s candidate index within `edits` of `word` (see
    /// [`super::candidates::CandidateIndex::lookup`]).
    fn get(&mut self, r: &Repairer, word: &str, edits: u8) -> &[(u32, u8)] {
        let slot = usize::from(edits.min(2));
        if self.found.get(word).is_none_or(|f| f[slot].is_none()) {
            let mut v = Vec::new();
            r.candidates.lookup(word, edits, &mut v);
            self.found.entry(word.into()).or_default()[slot] = Some(v);
        }
        self.found
            .get(word)
            .and_then(|f| f[slot].as_deref())
            .unwrap_or_default()
    }
}

/// An editable word looked up as unknown (or known only to the corpus): its candidates,
/// whether it reads as a typo at all, and whether the usage list reads it as one of their typos
/// ([`typo_of_a_written_word`]), which names the candidates it may go to.
#[derive(Default)]
struct LookedUp {
    found: Vec<(u32, u8)>,
    /// [`error_model::cost`] of each candidate in `found`, where already computed.
    channel: Vec<Option<f32>>,
    typo: bool,
    usage_typo: bool,
    /// The usage rule reads the string as a typo only at the margin for strings the corpus
    /// lacks ([`super::Params::short_unindexed_typo_usage_margin`]): the candidates that margin
    /// passes are named, as none passes the stricter one.
    names_leniently: bool,
    /// The margin a candidate must clear to be named: the short-word margin the string was
    /// read a typo at where only that names ([`short_usage_margin`]), else the stricter.
    naming_margin: UsageMargin,
    /// A short written string far rarer than a word one edit away
    /// ([`written_less_than_a_near_word`]).
    pays_pairs: bool,
    /// The documents the query retrieved write a candidate instead ([`Vote::for_change`]):
    /// the string is a slip even where one of them writes it too (the corpus's own typo).
    outvoted: bool,
}

/// The readings of every position: `readings[i]` start at word `i`.
pub(crate) fn readings(
    r: &Repairer,
    words: &[QueryWord],
    retrieved: Option<&RetrievedWords>,
    lookups: &mut Lookups,
) -> Vec<Vec<Reading>> {
    let p = &r.params;
    let vote = Vote::new(r, words, retrieved);
    let n = words.len();
    let mut out: Vec<Vec<Reading>> = Vec::with_capacity(n);
    // A word only the corpus knows may be one of the corpus's own typos: it is looked up like an
    // unknown word, but a change pays `corpus_word_cost` on top.
    let corpus_only =
        |w: &QueryWord| w.stats.general == 0 && w.stats.corpus > 0 && r.lm.has_general();
    let mut looked_up: Vec<Option<LookedUp>> = words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            (w.editable && (!w.stats.known() || corpus_only(w)) && w.lower.len() >= p.min_letters)
                .then(|| {
                    let found = candidates_of(r, &w.lower, lookups);
                    let mut channel = vec![None; found.len()];
                    // The documents the query retrieved write a candidate and never the word
                    // as typed (`famivr`, where they write `famvir`): a slip, as the usage
                    // rule reads one.
                    let voted = || {
                        found.iter().any(|&(id, _)| {
                            let stats = r.candidate_stats[id as usize];
                            let meant = r.candidates.word(id);
                            vote.for_change(i, &w.lower, meant, stats.corpus, 1.0) > 0.0
                        })
                    };
                    let slipped = slipped_from(r, w, &found, &mut channel);
                    let strict = UsageMargin {
                        short: p.short_word_typo_usage_margin,
                        slipped,
                    };
                    let short_margin = UsageMargin {
                        short: short_usage_margin(r, w),
                        slipped,
                    };
                    let usage_typo =
                        typo_of_a_written_word(r, &w.lower, &found, &mut channel, short_margin);
                    let names_leniently = usage_typo
                        && short_margin.short != strict.short
                        && !typo_of_a_written_word(r, &w.lower, &found, &mut channel, strict);
                    let naming_margin = if names_leniently {
                        short_margin
                    } else {
                        strict
                    };
                    let outvoted = voted();
                    let typo = usage_typo
                        || over_regularised(r, &w.lower, 0.0).next().is_some()
                        || (!found.is_empty() && r.unwritten_rare_start(&w.lower))
                        || outvoted;
                    let pays_pairs = !typo
                        && (written_less_than_a_near_word(r, &w.lower, &found)
                            || near_word_in_a_phrase(r, words, i, &found));
                    LookedUp {
                        found,
                        channel,
                        typo,
                        usage_typo,
                        names_leniently,
                        naming_margin,
                        pays_pairs,
                        outvoted,
                    }
                })
        })
        .collect();
    // A query whose editable words are mostly unknown is another language or not words at all.
    // A word the usage list shows to be a common word's misspelling is no sign of either
    // (`benifits of vitex agnus`).
    let mut unknown: Vec<&str> = words
        .iter()
        .zip(&looked_up)
        .filter(|(w, l)| w.editable && !w.stats.known() && !l.as_ref().is_some_and(|l| l.typo))
        .map(|(w, _)| w.lower.as_str())
        .collect();
    unknown.sort_unstable();
    unknown.dedup();
    // Distinct words: a name said twice (`mahi mahi`) is one.
    let editable_unknown = unknown.len();
    let give_up = editable_unknown >= 3 && 2 * editable_unknown >= words.len();
    let defined = defined_word(words);
    for (i, w) in words.iter().enumerate() {
        let letters = w.lower.len();
        // An unknown word kept as typed: the shorter, the likelier an acronym or a name.
        let keep_cost = if w.editable && !w.stats.known() {
            letter_rate(p, letters) + r.usage_cost(&w.lower)
        } else {
            0.0
        };
        let mut rs = vec![Reading {
            span: 1,
            words: smallvec![(w.lower.as_str().into(), w.stats)],
            cost: keep_cost,
            kind: None,
            distance: 0,
        }];
        if give_up || !w.editable {
            out.push(rs);
            continue;
        }
        let prev = i.checked_sub(1).map(|j| &words[j]);
        let next = words.get(i + 1);
        let mut corpus_only = corpus_only(w);
        // What a query asks the meaning of is believed as typed.
        let defined_cost = if defined == Some(i) {
            p.defined_word_cost
        } else {
            0.0
        };
        let mut keep_pays_pairs = false;
        // The neighbours an unwritten string kept as typed already pays for.
        let mut unwritten_paid = 0;
        let mut defined_typo = false;
        if !w.stats.known() || corpus_only {
            // Looked up from `min_letters` letters on.
            let LookedUp {
                found,
                mut channel,
                typo,
                usage_typo,
                names_leniently,
                naming_margin,
                pays_pairs,
                outvoted,
            } = looked_up[i].take().unwrap_or_default();
            // The usage list reads the string as some candidates' typo (a string nobody writes
            // as one written once in a billion words): those it names, or that spell the
            // string's sound (`thear`, `there`), are what the writer meant, not the others
            // (`articals` is `articles`, not `article`).
            let usage_names = usage_typo && !names_leniently && p.unnamed_reading_cost != 0.0;
            // A word beside an unknown one is as often part of a name (`groupone
            // healthsource`).
            let beside_unknown = [prev, next]
                .iter()
                .any(|q| q.is_some_and(|q| q.editable && !q.stats.known()));
            if typo {
                // Neither its being written nor the corpus's use of it speaks for it, and as
                // typed it is never seen beside its neighbours either: it pays for each known one
                // what a correction pays for an unseen pair.
                corpus_only = false;
                keep_pays_pairs = true;
                rs[0].cost = typo_keep_cost(r, w, prev, next);
                // Read as a common word's typo, a long word is no rare term the asker looks up:
                // people ask the meaning of the words they cannot spell (`what does definately
                // mean`). Shorter ones are names and acronyms as often (`poct`, `hirad`).
                defined_typo = p.defined_typo_free && letters >= p.long_word;
            } else if w.possessive
                && p.possessive_name_letters > 0
                && letters >= p.possessive_name_letters
                && !w.stats.known()
                && r.ln_usage(&w.lower).is_some()
            {
                // A string people write, no common word's typo, before `'s`: a name's
                // possessive (`peyer's patch`, `marvin hagler's`), kept as typed.
                out.push(rs);
                continue;
            } else if pays_pairs && defined != Some(i) {
                // A short string people write far less than a word one slip away: not named a
                // typo, but no longer spared the pairs its correction pays.
                keep_pays_pairs = true;
                rs[0].cost += p.unseen_pair_cost * known_neighbours(prev, next) as f64;
            }
            let extra = if corpus_only { p.corpus_word_cost } else { 0.0 };
            // The documents about the query hold the word as typed: a name, not a slip — unless
            // far more of them write a word one slip away.
            if vote.uses(&w.lower) && !outvoted {
                rs[0].cost -= p.vote_keep;
            }
            if letters >= p.min_letters {
                // A start no English word has says the first letter is the one slip; a candidate
                // two edits away pays for a first-letter edit as usual.
                let rare_start_first_letter = r.first_letter_cost(&w.lower);
                // A typo people write (the usage list holds the string; see the lift below).
                let written_typo = typo && r.ln_usage(&w.lower).is_some();
                // A string people write that the usage rule reads as no typo is a word of its
                // own (a name, a brand, a term): two edits from a common word is no evidence
                // against it.
                let written_word = !typo
                    && p.written_word_usage > 0
                    && r.lm
                        .usage(&w.lower)
                        .is_some_and(|u| u >= p.written_word_usage);
                // A string people write more rarely, and no typo by the usage rule: a name as
                // often (`placida`, `secura`), read two edits away only where the edits cost
                // what one slip does (`compair`).
                let rarely_written = p
                    .rarely_written_two_edit_cost
                    .filter(|_| !typo && !written_word && r.ln_usage(&w.lower).is_some());
                // A long string nobody writes (see the lift below); whether it is words run
                // together is asked once, of the first candidate that needs it.
                let unwritten = r.has_usage() && r.ln_usage(&w.lower).is_none();
                let unwritten_long = unwritten
                    && p.unwritten_typo_letters > 0
                    && letters >= p.unwritten_typo_letters;
                // A string people write that the usage rule reads as a typo is asked too: its
                // slips say which word, two edits away as well (`cinammon`).
                let asks_slips = (unwritten || p.written_typo_slips && written_typo)
                    && p.unwritten_swap_letters > 0
                    && letters >= p.unwritten_swap_letters;
                // A word broken in two is no word with its last letter lost: its pieces join
                // (`pathologi sts`).
                let joins_next = p.unwritten_last_lost
                    && asks_slips
                    && next
                        .is_some_and(|q| r.usable(&r.lm.stats(&format!("{}{}", w.lower, q.lower))));
                // Whether the string is listed words run together, and which word one edit away
                // is likeliest by its writings and the edit, asked once, where needed.
                let run_together_words = std::cell::OnceCell::new();
                let likeliest_near = std::cell::OnceCell::new();
                // Per candidate of such a string: how a word the writer knows goes wrong, where a
                // name rarely differs from a word so (see `Slip`).
                let slips: Vec<Slip> = if asks_slips {
                    found
                        .iter()
                        .map(|&(id, d)| {
                            let (t, m) = (w.lower.as_bytes(), r.candidates.word(id).as_bytes());
                            Slip {
                                sounded: d > MAX_EDITS,
                                swapped: swapped_after_first(t, m),
                                respelt: p.unwritten_respelling && error_model::is_respelling(t, m),
                                doubled: p.unwritten_doubling_moved && doubling_moved(t, m),
                                single: p.unwritten_doubling_lost && doubling_lost(t, m),
                                lost: inner_letter_lost(t, m)
                                    && (p.unwritten_letter_lost_letters > 0
                                        && t.len() >= p.unwritten_letter_lost_letters
                                        || p.short_unwritten_letter_lost_letters > 0
                                            && t.len() >= p.short_unwritten_letter_lost_letters
                                            && t.len() < p.unwritten_letter_lost_letters
                                            && unwritten
                                            && !joins_next
                                            && *likeliest_near.get_or_init(|| {
                                                likeliest_one_edit(r, t, &found, &mut channel)
                                            }) == Some(id)
                                            && !*run_together_words.get_or_init(|| {
                                                listed_words_run_together(r, &w.lower)
                                            })),
                                vowel: p.unwritten_vowel_letters > 0
                                    && t.len() >= p.unwritten_vowel_letters
                                    && inner_vowel_changed(t, m),
                                keyed: p.unwritten_key_letters > 0
                                    && t.len() >= p.unwritten_key_letters
                                    && inner_consonant_keyed(t, m),
                                key_added: p.unwritten_key_added_letters > 0
                                    && t.len() >= p.unwritten_key_added_letters
                                    && inner_consonant_struck_beside(t, m),
                                last_lost: p.unwritten_last_lost
                                    && !joins_next
                                    && t.len() >= p.unwritten_letter_lost_letters
                                    && last_letter_lost(next.map(|q| q.lower.as_str()), t, m),
                                first_lost: p.unwritten_first_lost
                                    && first_letter_lost(
                                        prev.map(|q| q.lower.as_str()),
                                        t,
                                        m,
                                        p.unwritten_first_lost_letters,
                                    ),
                            }
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                // A word the lists hold is the string so read: kept as typed, it pays for being
                // no name but a slip. A doubling moved or a first letter lost lowers that word
                // alone: its edits are as often another word's (`motoo` is `motto` so, and
                // `motor` a letter off; `rellis` is `trellis` so, and `rolls` two off).
                let keep_pays_slip =
                    !w.stats.known() && slips.iter().any(|s| s.swapped || s.respelt);
                if keep_pays_slip {
                    rs[0].cost += p.unwritten_swap_keep_cost;
                }
                let mut scored: Vec<Candidate> = found
                    .iter()
                    .enumerate()
                    .filter_map(|(k, &(id, d))| {
                        let meant = r.candidates.word(id);
                        let slip = slips.get(k).copied().unwrap_or_default();
                        if another_form(r, &w.lower, meant)
                            || (written_word && d >= 2)
                            || rarely_written.is_some_and(|most| {
                                // Kept in `channel`: the reading's cost below is this one.
                                let (t, m) = (w.lower.as_bytes(), meant.as_bytes());
                                d >= 2
                                    && f64::from(channel.get_mut(k).map_or_else(
                                        || error_model::cost(t, m),
                                        |slot| *slot.get_or_insert_with(|| error_model::cost(t, m)),
                                    )) > most
                            })
                        {
                            return None;
                        }
                        let stats = r.candidate_stats[id as usize];
                        let first_letter = if d == 1 {
                            rare_start_first_letter
                        } else {
                            error_model::FIRST_LETTER
                        };
                        let cost = f64::from(match channel.get(k).copied().flatten() {
                            Some(cost) if first_letter == error_model::FIRST_LETTER => cost,
                            _ => error_model::cost_with_first_letter(
                                w.lower.as_bytes(),
                                meant.as_bytes(),
                                first_letter,
                            ),
                        });
                        // The usage rule weighs the edit at the usual first-letter cost: this
                        // one, unless a rare start made the first letter free.
                        let usage_channel =
                            (first_letter == error_model::FIRST_LETTER).then_some(cost);
                        // A string people write, but far less than a word one edit away, is
                        // that word's typo, and the word is no less likely than the string: as
                        // rare a word as `migraine` sits at the model's floor, below an unknown
                        // word's prior, where its typo `migrane` would win. So is a long string
                        // nobody writes that keeps the word's ends (`petrifyed`); a shorter one
                        // is as often a name (`sarkeys`, `ponstel`, `canopius`) unless two of its
                        // letters are swapped (`walmrat`, a slip of the hand), and a prefix or
                        // a word before a listed word is a word the lists lack or two run
                        // together (`anhydrate`, `latitudeis`). Two edits away, a term:
                        // `primase` is no `promise`.
                        let unwritten_typo_of = || {
                            (unwritten_long
                                || slip.swapped
                                || slip.respelt
                                || slip.doubled
                                || slip.single
                                || slip.lost
                                || slip.last_lost
                                || slip.vowel
                                || slip.keyed
                                || slip.key_added
                                || slip.first_lost)
                                && (slip.first_lost
                                    || slip.last_lost
                                    || keeps_ends(w.lower.as_bytes(), meant.as_bytes()))
                                && !*run_together_words
                                    .get_or_init(|| listed_words_run_together(r, &w.lower))
                        };
                        let named = written_typo
                            && keeps_ends(w.lower.as_bytes(), meant.as_bytes())
                            && written_far_more(r, &w.lower, id, usage_channel, naming_margin);
                        // Two edits apart, only a sound spelt another way (`mekanic`) or a
                        // doubling moved (`dissmis`); three or more, nothing (a word found by
                        // its sound is lowered, not lifted: `caracciola` is no `caracalla`).
                        let near = d == 1 || d == 2 && (slip.respelt || slip.doubled);
                        let floor_gap = if near && (named || unwritten_typo_of()) {
                            (p.ln_unknown_word - r.lm.ln_unigram(&stats)).max(0.0)
                        } else {
                            0.0
                        };
                        let unnamed = usage_names
                            && !named
                            && !named_by_usage(r, &w.lower, id, usage_channel, naming_margin)
                            && !error_model::is_respelling(w.lower.as_bytes(), meant.as_bytes());
                        // What a slip's keeping pays, where the slip lowers the word instead.
                        // A letter lost inside lowers its word too, unless a name may be meant.
                        let lost_lowers = (slip.lost || slip.last_lost)
                            && p.unwritten_letter_lost_lowers
                            && !beside_a_name(w, prev, next);
                        let slip_pays =
                            if (slip.doubled || slip.first_lost || slip.sounded || lost_lowers)
                                && !keep_pays_slip
                                && !w.stats.known()
                            {
                                p.unwritten_swap_keep_cost
                            } else {
                                0.0
                            };
                        // Two edits no slip explains, from a string nobody writes: a name's
                        // or a term's as often (`millings` is no `millions`).
                        let unexplained = if d >= 2
                            && unwritten
                            && !unwritten_long
                            && !(slip.swapped
                                || slip.respelt
                                || slip.doubled
                                || slip.single
                                || slip.sounded)
                        {
                            p.unexplained_two_edit_cost
                        } else {
                            0.0
                        };
                        let cost = cost + extra + unexplained
                            - floor_gap
                            - slip_pays
                            - r.context_bonus(meant, stats.corpus, letters, words)
                            - vote.for_change(i, &w.lower, meant, stats.corpus, p.vote_bonus);
                        let rank = cost - r.lm.ln_unigram(&stats);
                        rank.is_finite().then(|| Candidate {
                            rank,
                            reading: Reading {
                                span: 1,
                                words: smallvec![(meant.into(), stats)],
                                cost,
                                kind: Some(if corpus_only {
                                    EditKind::RealWord
                                } else {
                                    EditKind::NonWord
                                }),
                                distance: d,
                            },
                            unnamed,
                            keeps_ends: keeps_ends(w.lower.as_bytes(), meant.as_bytes()),
                        })
                    })
                    .collect();
                // A word that sounds as a named one does is named with it: the rule says the
                // string is a typo of that sound, the neighbours say which word (`ther` names
                // `there`, and `their` with it: `get ther first shots`). Not another spelling
                // of the named word (`centre`, `programme`): the usage rule chose between those.
                let named_sounds: Vec<usize> = scored
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.unnamed)
                    .filter(|(_, c)| {
                        let word = &*c.reading.words[0].0;
                        let sounds = r.homophones(word);
                        scored.iter().any(|n| {
                            let named = &*n.reading.words[0].0;
                            !n.unnamed
                                && sounds.iter().any(|h| **h == *named)
                                && !spelling_variant(word, named)
                                && !word.starts_with(named)
                                && !named.starts_with(word)
                        })
                    })
                    .map(|(k, _)| k)
                    .collect();
                for k in named_sounds {
                    scored[k].unnamed = false;
                }
                // What the usage rule names is what the writer meant, and so is a word that
                // keeps the string's ends fewer edits away than any word it names: the rule says
                // the string is a typo, the edits say of which word (`sptuce` names `space`,
                // written far more but two edits away; `spruce` is one key off). The others pay
                // `unnamed_reading_cost`.
                let nearest_named = scored
                    .iter()
                    .filter(|c| !c.unnamed)
                    .map(|c| c.reading.distance)
                    .min();
                for c in &mut scored {
                    let nearer =
                        nearest_named.is_some_and(|d| c.keeps_ends && c.reading.distance < d);
                    if c.unnamed && !nearer {
                        c.rank += p.unnamed_reading_cost;
                        c.reading.cost += p.unnamed_reading_cost;
                    }
                }
                let mut scored: Vec<(f64, Reading)> =
                    scored.into_iter().map(|c| (c.rank, c.reading)).collect();
                scored.sort_by(|a, b| a.0.total_cmp(&b.0));
                rs.extend(scored.into_iter().take(p.max_candidates).map(|s| s.1));
                // An irregular verb's forms or a noun's old plural, where the string puts the
                // regular ending on it; a form the edits found too is read at the cheaper cost.
                // They name what the writer meant, as the usage rule does: the other words the
                // edits reach two letters away pay `unnamed_reading_cost` (`thiefs` is no typo
                // of `this`); one slip away is as likely (`layed` for `played`, `rised` for
                // `raised`).
                let edits_end = rs.len();
                let mut named = false;
                for mut f in over_regularised(r, &w.lower, extra) {
                    named = true;
                    let (meant, stats) = (&f.words[0].0, f.words[0].1);
                    let bonus = r.context_bonus(meant, stats.corpus, letters, words)
                        + vote.for_change(i, &w.lower, meant, stats.corpus, p.vote_bonus);
                    f.cost -= bonus;
                    if corpus_only {
                        f.kind = Some(EditKind::RealWord);
                    }
                    match rs.iter_mut().find(|x| x.words == f.words) {
                        Some(x) if f.cost < x.cost => *x = f,
                        Some(_) => {}
                        None => rs.push(f),
                    }
                }
                if named {
                    let forms = r.over_regularised(&w.lower);
                    for x in rs.iter_mut().take(edits_end).skip(1) {
                        if x.distance > 1 && !forms.iter().any(|f| **f == *x.words[0].0) {
                            x.cost += p.unnamed_reading_cost;
                        }
                    }
                }
                // Nobody writes it and the corpus lacks it, and a word is one edit away: as
                // typed it is never seen beside its neighbours, as the word may be.
                if p.unwritten_pays_pairs_letters > 0
                    && letters >= p.unwritten_pays_pairs_letters
                    && !keep_pays_pairs
                    && !w.stats.known()
                    && unwritten
                    && defined != Some(i)
                    && !beside_unknown
                    && !w.capitalised
                    && found.iter().any(|f| f.1 == 1)
                {
                    let content = [prev, next]
                        .iter()
                        .filter(|q| {
                            q.is_some_and(|q| q.stats.known() && q.content && !q.capitalised)
                        })
                        .count();
                    rs[0].cost += p.unseen_pair_cost * content as f64;
                    unwritten_paid = content;
                }
            } else if letters + 1 == p.min_letters {
                let (slips, typo) = function_word_slips(r, w, extra, lookups);
                // A string written far less than the function word it slips from is that word's
                // typo, as the usage rule reads longer ones: as typed it pays for each known
                // neighbour what a correction pays for an unseen pair (`swelling whn riding`).
                if typo {
                    keep_pays_pairs = true;
                    rs[0].cost = typo_keep_cost(r, w, prev, next);
                }
                // Any slip of the hand, the first letter's too, where the neighbours want the
                // function word (`what is rhe best`, `hiw long`).
                let wanted: Vec<Reading> = function_word_in_context(r, words, i)
                    .into_iter()
                    .filter(|c| !slips.iter().any(|s| s.words == c.words))
                    .collect();
                rs.extend(slips);
                rs.extend(wanted);
                rs.extend(three_letter_content_words(r, w, prev, next, extra, lookups));
            } else if letters == 2 && p.swapped_function_word_cost.is_some() {
                // Two letters swapped in a function word, where the neighbours want it (`how ot
                // cook` → `how to`); other two-letter strings are acronyms. Where they do, the
                // string's being written (as an acronym: `ot`, `si`) is no evidence against the
                // function word: the reading gets back what keeping the string earns for it.
                let written = if w.stats.known() {
                    0.0
                } else {
                    r.usage_cost(&w.lower).min(0.0)
                };
                rs.extend(
                    function_word_in_context(r, words, i)
                        .into_iter()
                        .map(|x| Reading {
                            cost: x.cost + written,
                            ..x
                        }),
                );
            }
            // The word before wants the article, in the same phrase (`have alot of`); at a
            // phrase's start, or after a word that does not want it (`Nowadays alot of`), the
            // usage list and the word after speak instead (`Alot of`).
            let by_next_word = |least: f64, allowed: bool| match next {
                Some(q) if allowed && q.spaced_from_previous && !w.ends_phrase => {
                    ArticleSplit::ByNextWord {
                        least,
                        next: q.stats,
                    }
                }
                _ => ArticleSplit::No,
            };
            let article = match (p.article_split_association, prev) {
                (None, _) => ArticleSplit::No,
                (Some(least), Some(q)) if !q.ends_phrase => {
                    if r.lm
                        .ln_general_over_chance(&q.stats, &r.lm.stats("a"))
                        .is_some_and(|x| x >= least)
                    {
                        ArticleSplit::AfterWord
                    } else {
                        by_next_word(least, p.article_split_by_next_word)
                    }
                }
                (Some(least), _) => by_next_word(least, p.article_split_at_start),
            };
            if !corpus_only
                && w.whole_token
                && (letters >= p.min_split_letters
                    || !matches!(article, ArticleSplit::No)
                        && letters + 1 == p.min_split_letters
                        && w.lower.starts_with('a'))
            {
                // A piece of a word broken in two joins with its other piece into a word
                // (`pollinat or`): it is split into two words at most. Asked only where a
                // three-word split could be read at all.
                let joins_neighbour = |a: &str, b: &str| {
                    let s = r.lm.stats(&format!("{a}{b}"));
                    s.general > 0 || s.corpus >= p.min_corpus_count
                };
                let three_words = p.three_word_split_letters > 0
                    && w.lower.len() >= p.three_word_split_letters
                    && !(prev.is_some_and(|q| joins_neighbour(&q.lower, &w.lower))
                        || next.is_some_and(|q| joins_neighbour(&w.lower, &q.lower)));
                // The next word, in the same phrase, takes the article (`doesa psychotherapist`).
                let article_at_end = p.article_split_at_end
                    && !w.ends_phrase
                    && next.is_some_and(|q| {
                        q.spaced_from_previous
                            && !is_stopword(&q.lower)
                            && q.lower.starts_with(|c: char| {
                                c.is_ascii_alphabetic() && !"aeiou".contains(c)
                            })
                    });
                let near_word = found.iter().any(|f| f.1 <= 1);
                let mut split = splits(
                    r,
                    &w.lower,
                    beside_unknown,
                    three_words,
                    article,
                    article_at_end,
                    near_word,
                );
                // A name run into a word, where the string reads as no three words
                // (`dewpointrecorded` is `dew point recorded`, not the name `dewpoint`) and is
                // no word's typo one edit away (`toight` is `tonight`, not `to ight`).
                if split.last().is_none_or(|x| x.words.len() < 3) && !near_word {
                    split.extend(name_run_into_word(r, &w.lower, beside_unknown));
                }
                // A phrase seldom ends with a function word, unless a verb's particle or a
                // question's preposition (`shore up`, `used for`): at the query's end or before a
                // mark, a string one edit from a word is that word's typo, not such a split
                // (`dwayne johnon`, `mla forat`, `meanin`: `john on`, `for at`, `mean in`).
                if w.ends_phrase && found.iter().any(|f| f.1 == 1) {
                    split.retain(|s| s.words.last().is_none_or(|(x, _)| !is_stopword(x)));
                }
                // Not a string nobody writes: it is as often words run together
                // (`latitudeis`) as a word's typo.
                if usage_names && r.ln_usage(&w.lower).is_some() {
                    for s in &mut split {
                        s.cost += p.named_split_cost;
                    }
                }
                // Nobody writes it, so as typed it is never seen beside its neighbours either,
                // while its split pays for each unseen pair: kept, it pays for each known
                // neighbour too, as a typo does — but not where it is a name's part (beside an
                // unknown word) or what the query asks the meaning of.
                if p.run_together_pays_pairs
                    && !keep_pays_pairs
                    && !beside_unknown
                    && defined != Some(i)
                    && run_together(r, &w.lower, &split)
                {
                    let unpaid = known_neighbours(prev, next).saturating_sub(unwritten_paid);
                    rs[0].cost += p.unseen_pair_cost * unpaid as f64;
                    // A question opens with its function word (`howtall is`, `isbadminton a
                    // sport`), which the word's own probability does not know: at the query's
                    // start such a split pays nothing the string kept does not.
                    if p.question_start_split_cost > 0.0
                        && prev.is_none()
                        && split[0].words.first().is_some_and(|(x, _)| is_stopword(x))
                    {
                        rs[0].cost += p.question_start_split_cost;
                    }
                }
                rs.extend(split);
            }
            // Not again where a split above reads the same words (`doesa`: `does a`).
            if let Some(x) = function_word_and_article(r, w, prev, next) {
                if !rs.iter().any(|y| y.words == x.words) {
                    rs.push(x);
                }
            }
        } else if w.content
            && letters >= p.min_letters
            && !is_stopword(&w.lower)
            && (prev.is_some() || next.is_some())
        {
            rs.extend(real_words(r, words, i, &vote, lookups));
            let sounds: Vec<Reading> = homophones_in_context(r, words, i, &vote)
                .into_iter()
                .filter(|h| !rs.iter().any(|x| x.words == h.words))
                .collect();
            rs.extend(sounds);
        }
        // A known word of slip length may be a function word mistyped; a function word of
        // any length, with homophones on, one misheard.
        if w.stats.known()
            && (FUNCTION_SLIP_LETTERS.contains(&letters)
                || (p.homophone_cost.is_some()
                    && is_stopword(&w.lower)
                    && !r.homophones(&w.lower).is_empty()))
        {
            rs.extend(function_word_in_context(r, words, i));
        }
        // A short string the documents about the query never write, one edit from a word most
        // of them do (`do goldfish gow`, `cook sou vide`): the two lengths below `min_letters`.
        if letters < p.min_letters && letters + 2 >= p.min_letters {
            for v in voted_short_words(r, w, i, &vote, lookups) {
                match rs.iter_mut().find(|x| x.words == v.words) {
                    Some(x) if v.cost < x.cost => *x = v,
                    Some(_) => {}
                    None => rs.push(v),
                }
            }
        }
        // A join with the next word.
        if let Some(nx) = next {
            if nx.editable && nx.spaced_from_previous && w.whole_token && nx.whole_token {
                let joined = [&*w.lower, &*nx.lower].concat();
                let stats = r.lm.stats(&joined);
                if joined.len() >= p.min_join_letters
                    && stats.known()
                    && (stats.general > 0 || stats.corpus >= p.min_corpus_count)
                {
                    // Two real words pay the known-word prior; a fragment (an unknown word or
                    // a short piece that is no function word: `broth er`) does not, nor an `s`
                    // standing alone with no content word after it in its phrase: a plural's
                    // ending broken off (`nerve s in my nose`). Before a content word it is as
                    // often a possessive whose apostrophe went (`associate s degree`).
                    let after = words
                        .get(i + 2)
                        .filter(|q| !nx.ends_phrase && q.spaced_from_previous);
                    let plural_ending = nx.lower == "s" && after.is_none_or(|q| !q.content);
                    let fragment = |q: &QueryWord| {
                        !q.stats.known() || (q.lower.len() <= 2 && !is_stopword(&q.lower))
                    };
                    // Nor do two known words that are one word split (`heart burn`).
                    let both_known = !fragment(w)
                        && !fragment(nx)
                        && !plural_ending
                        && !r.written_together(&joined, &w.lower, &nx.lower);
                    let pieces_written = written_pieces_bonus(r, &joined, w, nx);
                    rs.push(Reading {
                        span: 2,
                        words: smallvec![(joined.into(), stats)],
                        cost: JOIN as f64 + if both_known { p.join_known_cost } else { 0.0 }
                            - pieces_written,
                        kind: Some(EditKind::Join),
                        distance: 1,
                    });
                }
            }
        }
        // Words run together are no rarer there than elsewhere (`what is a studentsenate`).
        // A typo's correction one edit away is what the asker meant; two edits away is another
        // word as often (`strategery` is no `strategy`).
        for reading in rs.iter_mut().skip(1) {
            let meant =
                defined_typo && reading.kind == Some(EditKind::NonWord) && reading.distance <= 1;
            if reading.kind != Some(EditKind::Split) && !meant {
                reading.cost += defined_cost;
            }
        }
        // An article ends no phrase (`how to tie a tye`, `how to tke`, `wayfair tle` are no
        // `a the`, `to the`, `wayfair the`): a reading that would end one so is none. The word
        // as typed stays a reading.
        if w.ends_phrase {
            let mut k = 0;
            rs.retain(|x| {
                k += 1;
                k == 1
                    || x.span > 1
                    || !x
                        .words
                        .last()
                        .is_some_and(|(m, _)| matches!(m.as_str(), "a" | "an" | "the"))
            });
        }
        // A contraction typed without its apostrophe (`we dont really need`, `im sorry`) is
        // what the writer meant, not another word's typo: it may only join the next word
        // (`act ive` is `active`).
        if w.stats.general == 0 && r.lm.apostrophe_left_out(&w.lower) {
            let mut k = 0;
            rs.retain(|x| {
                k += 1;
                k == 1 || x.span > 1
            });
        }
        out.push(rs);
    }
    out
}

/// The cost of keeping as typed an unknown word read as a written word's typo: no belief for
/// being written, and for each known neighbour what a correction pays for an unseen pair (as
/// typed, it is never seen beside them either).
fn typo_keep_cost(
    r: &Repairer,
    w: &QueryWord,
    prev: Option<&QueryWord>,
    next: Option<&QueryWord>,
) -> f64 {
    let p = &r.params;
    let unseen = known_neighbours(prev, next);
    letter_rate(p, w.lower.len()) + r.unlisted_cost(&w.lower) + p.unseen_pair_cost * unseen as f64
}

/// What keeping the unknown pieces of a join as typed earns for their being written, where
/// each is written e^[`super::Params::fragment_usage_margin`] times less than the word they
/// join into (`sala ry`, `num ber`, `cli nic`: the usage list holds such strings, as
/// abbreviations, names or pieces of words): such writings are no evidence for the pieces
/// against the word.
fn written_pieces_bonus(r: &Repairer, joined: &str, a: &QueryWord, b: &QueryWord) -> f64 {
    let margin = r.params.fragment_usage_margin;
    let Some(whole) = r.lm.usage(joined).filter(|_| margin > 0.0) else {
        return 0.0;
    };
    [a, b]
        .iter()
        .filter(|q| !q.stats.known())
        .filter_map(|q| {
            let piece = r.lm.usage(&q.lower)?;
            (piece as f64 * margin.exp() <= whole as f64)
                .then(|| (-r.usage_cost(&q.lower)).max(0.0))
        })
        .sum()
}

/// How many of a word's neighbours are known words (the pairs a word as typed is never seen in).
fn known_neighbours(prev: Option<&QueryWord>, next: Option<&QueryWord>) -> usize {
    [prev, next]
        .iter()
        .filter(|q| q.is_some_and(|q| q.stats.known()))
        .count()
}

/// The candidates of an unknown word of at least [`super::Params::min_letters`] letters.
fn candidates_of(r: &Repairer, typed: &str, lookups: &mut Lookups) -> Vec<(u32, u8)> {
    let mut found = if typed.len() >= r.params.two_edits_from {
        let mut found = lookups.get(r, typed, 2).to_vec();
        // A sound spelt another way is one error however far apart its letters are, as for a
        // short word (`storys` for `stories`): a string people write is kept from words two
        // edits away, not from its own sound spelt the usual way. (One nobody writes is read
        // so by its slip, `unwritten_respelling`.)
        if r.ln_usage(typed).is_some() {
            error_model::respellings(typed.as_bytes(), |s| {
                let id = std::str::from_utf8(s)
                    .ok()
                    .and_then(|s| r.candidates.find(s));
                if let Some(f) = id.and_then(|id| found.iter_mut().find(|f| f.0 == id)) {
                    f.1 = f.1.min(1);
                }
            });
        }
        found
    } else {
        short_word_candidates(r, typed, lookups)
    };
    sound_candidates(r, typed, &mut found);
    r.drop_rarer_usage_words(&mut found);
    found
}

/// Adds to `found` the words that sound as `typed` does, three to
/// [`super::Params::sound_edits`] edits away, where `typed` is a long string nobody writes
/// ([`super::Params::sound_letters`]) and no word found keeps its ends, that keep them: a word
/// written by ear (`nessisary`). One that does not is as often another word's sound
/// (`yeparate` is `operate`'s, and `separate` a key off).
fn sound_candidates(r: &Repairer, typed: &str, found: &mut Vec<(u32, u8)>) {
    let p = &r.params;
    let keeps =
        |&(id, _): &(u32, u8)| keeps_ends(typed.as_bytes(), r.candidates.word(id).as_bytes());
    if !r.looks_up_sounds(typed) || found.iter().any(keeps) {
        return;
    }
    let mut ids = Vec::new();
    r.sounds.lookup(typed, &mut ids);
    for id in ids {
        let meant = r.candidates.word(id).as_bytes();
        let d = error_model::distance(typed.as_bytes(), meant, p.sound_edits);
        if d > MAX_EDITS && d <= p.sound_edits && keeps_ends(typed.as_bytes(), meant) {
            found.push((id, d));
        }
    }
}

/// Candidates of a word shorter than [`super::Params::two_edits_from`]: one edit away, or two
/// doubled letters short of a word (`adres` for `address`,
/// [`super::Params::two_doubled_letters`]); short words have too many neighbours two edits away
/// to try them all.
fn short_word_candidates(r: &Repairer, typed: &str, lookups: &mut Lookups) -> Vec<(u32, u8)> {
    let mut found = lookups.get(r, typed, 1).to_vec();
    // A sound spelt another way (`thear` for `there`, `nite` for `night`) may be two letters
    // from the word, but it is one error, as one edit is: a string people write for itself is
    // kept from words two edits away, not from its own sound spelt the usual way.
    // So is a letter struck two keys away, or two pairs of keys out of step (`mkea` for
    // `make`, `ahev` for `have`): two edits, one slip of the hand.
    let mut add = |s: &[u8]| {
        let id = std::str::from_utf8(s)
            .ok()
            .and_then(|s| r.candidates.find(s));
        if let Some(id) = id.filter(|id| !found.iter().any(|f| f.0 == *id)) {
            found.push((id, 1));
        }
    };
    error_model::respellings(typed.as_bytes(), &mut add);
    error_model::rolled_keys(typed.as_bytes(), &mut add);
    if !r.params.two_doubled_letters {
        return found;
    }
    let t = typed.as_bytes();
    // A letter already doubled is not doubled again.
    let single = |i: usize| (i == 0 || t[i - 1] != t[i]) && t.get(i + 1) != Some(&t[i]);
    let mut doubled = String::with_capacity(t.len() + 2);
    for i in (0..t.len()).filter(|&i| single(i)) {
        for j in (i + 1..t.len()).filter(|&j| single(j)) {
            doubled.clear();
            doubled.push_str(&typed[..=i]);
            doubled.push_str(&typed[i..=j]);
            doubled.push_str(&typed[j..]);
            if let Some(id) = r.candidates.find(&doubled) {
                found.push((id, 2));
            }
        }
    }
    found
}

/// How much an unknown word's length adds to the cost of keeping it: short ones are mostly
/// acronyms and names, long ones typos.
fn letter_rate(p: &super::Params, letters: usize) -> f64 {
    let rate = if letters > 6 {
        p.unknown_per_extra_letter
    } else {
        p.unknown_per_letter
    };
    rate * (letters as f64 - 6.0)
}

/// Whether a word no list holds (or only the corpus) is written so much less than a word within
/// its edits with the same first and last letters, after the edit's cost, that its own writings
/// are that word's typos ([`super::Params::typo_usage_margin`], or
/// [`super::Params::short_word_typo_usage_margin`] for words shorter than
/// [`super::Params::long_word`]). A string nobody writes counts as written once in a billion
/// words. False without a usage list. Words found by their sound alone
/// ([`super::Params::sound_letters`]) are not asked: the rule weighs a slip's few edits, and a
/// word three edits off that keeps the string's ends would outrank the nearer word that does not
/// (`dweather` names `dither`, not `weather`).
/// The edit costs it computes are kept in `channel` (one slot per candidate of `found`).
fn typo_of_a_written_word(
    r: &Repairer,
    typed: &str,
    found: &[(u32, u8)],
    channel: &mut [Option<f32>],
    short_margin: UsageMargin,
) -> bool {
    found
        .iter()
        .zip(channel)
        .filter(|(&(_, d), _)| d <= MAX_EDITS)
        .any(|(&(id, _), slot)| {
            written_as_typo_of(r, typed, id, short_margin, || {
                let (t, m) = (typed.as_bytes(), r.candidates.word(id).as_bytes());
                f64::from(*slot.get_or_insert_with(|| error_model::cost(t, m)))
            })
        })
}

/// Whether the usage list reads the writings of `typed` as the typos of candidate `meant` (see
/// [`typo_of_a_written_word`]), `channel` giving the edit's [`error_model::cost`].
fn written_as_typo_of(
    r: &Repairer,
    typed: &str,
    meant: u32,
    short_margin: UsageMargin,
    channel: impl FnOnce() -> f64,
) -> bool {
    let word = r.candidates.word(meant);
    keeps_ends(typed.as_bytes(), word.as_bytes())
        && !another_form(r, typed, word)
        && written_far_more_with(r, typed, meant, short_margin, channel)
}

/// Whether a short string people write is written far less than a word one edit away that
/// keeps its ends ([`super::Params::short_written_pairs_margin`]).
fn written_less_than_a_near_word(r: &Repairer, typed: &str, found: &[(u32, u8)]) -> bool {
    let p = &r.params;
    let Some(margin) = p.short_written_pairs_margin else {
        return false;
    };
    if typed.len() >= p.long_word {
        return false;
    }
    let Some(ln_typed) = r.ln_usage(typed) else {
        return false;
    };
    found.iter().filter(|&&(_, d)| d <= 1).any(|&(id, _)| {
        let meant = r.candidates.word(id);
        let (t, m) = (typed.as_bytes(), meant.as_bytes());
        keeps_ends(t, m)
            && !another_form(r, typed, meant)
            && r.ln_usage(meant).is_some_and(|ln_meant| {
                ln_meant - f64::from(error_model::cost(t, m)) - ln_typed > margin
            })
    })
}

/// Whether a short string people write (fewer than [`super::Params::long_word`] letters) is one
/// edit from a word written more that a neighbour makes a set phrase with
/// ([`super::Params::phrase_pairs_association`]: `home depo` for `home depot`): the context
/// wants the word, so kept as typed the string is no longer spared the pairs its correction
/// pays.
fn near_word_in_a_phrase(r: &Repairer, words: &[QueryWord], i: usize, found: &[(u32, u8)]) -> bool {
    let Some(least) = r.params.phrase_pairs_association else {
        return false;
    };
    let typed = words[i].lower.as_str();
    if typed.len() >= r.params.long_word {
        return false;
    }
    let Some(typed_usage) = r.lm.usage(typed) else {
        return false;
    };
    let prev = i.checked_sub(1).map(|j| &words[j]);
    let next = words.get(i + 1);
    found.iter().filter(|&&(_, d)| d <= 1).any(|&(id, _)| {
        let meant = r.candidates.word(id);
        let sm = &r.candidate_stats[id as usize];
        let phrase = |a: &WordStats, b: &WordStats| {
            r.lm.ln_general_over_chance(a, b)
                .is_some_and(|ln| ln >= least)
        };
        r.candidate_usage(id).is_some_and(|u| u > typed_usage)
            && !another_form(r, typed, meant)
            && (prev.is_some_and(|q| q.content && phrase(&q.stats, sm))
                || next.is_some_and(|q| q.content && phrase(sm, &q.stats)))
    })
}

/// An unknown word's candidate as the decoder's readings are chosen from it: its rank (cost
/// less the word's ln probability), whether the usage rule leaves it unnamed, and whether it
/// keeps the typed string's ends.
struct Candidate {
    rank: f64,
    reading: Reading,
    unnamed: bool,
    keeps_ends: bool,
}

/// Whether the usage list reads the writings of `typed` as the typos of candidate `meant`, as
/// [`written_as_typo_of`] does, or would were it not for an end letter slipped to a key next
/// to the right one (`doed` for `does`, beside `deed`, which keeps the ends): the words a
/// correction of a written typo may go to at no extra cost
/// ([`super::Params::unnamed_reading_cost`]). `meant` is no other form of `typed` (the caller
/// has ruled those out); `channel` is [`error_model::cost`] of the two where already known.
fn named_by_usage(
    r: &Repairer,
    typed: &str,
    meant: u32,
    channel: Option<f64>,
    short_margin: UsageMargin,
) -> bool {
    let (t, m) = (typed.as_bytes(), r.candidates.word(meant).as_bytes());
    (keeps_ends(t, m) || (t.len() == m.len() && error_model::slip_of_the_hand(t, m)))
        && written_far_more(r, typed, meant, channel, short_margin)
}

/// Whether the usage list holds candidate `meant` written more often than `typed` by the usage
/// rule's margin after the edit's cost, [`error_model::cost`] (`channel` where the caller knows
/// it; see [`typo_of_a_written_word`]).
fn written_far_more(
    r: &Repairer,
    typed: &str,
    meant: u32,
    channel: Option<f64>,
    short_margin: UsageMargin,
) -> bool {
    written_far_more_with(r, typed, meant, short_margin, || {
        let m = r.candidates.word(meant).as_bytes();
        channel.unwrap_or_else(|| f64::from(error_model::cost(typed.as_bytes(), m)))
    })
}

/// The usage rule's margin for a short string typed as `w`:
/// [`super::Params::short_unindexed_typo_usage_margin`] where it is set, the string is short and
/// the index's corpus lacks it and it bears no name's marks (a capital, a possessive: `peyer's
/// patch`), else [`super::Params::short_word_typo_usage_margin`]. Computed once per word.
fn short_usage_margin(r: &Repairer, w: &QueryWord) -> f64 {
    let p = &r.params;
    p.short_unindexed_typo_usage_margin
        .filter(|_| {
            w.lower.len() < p.long_word && w.stats.corpus == 0 && !w.capitalised && !w.possessive
        })
        .unwrap_or(p.short_word_typo_usage_margin)
}

/// The usage rule's margins for one typed string: the short-word margin, and the word a slip
/// of the hand names ([`slipped_from`]), which clears [`super::Params::slip_usage_margin`]
/// instead where that is lower.
#[derive(Clone, Copy, Debug, Default)]
struct UsageMargin {
    short: f64,
    slipped: Option<u32>,
}

/// The word one edit from `typed` that the usage list and the error model find likeliest
/// ([`likeliest_one_edit`]), where `typed` is that word with a slip of the hand: one of its
/// doubled letters written once (`coffe`, `tatoo`) or two of its letters after the first
/// swapped (`mena`, `brun`, `telsa`) — the commonest misspellings, and seldom what tells a name
/// from a word. Not where a likelier word is one edit away too (`maning` is `meaning` with a
/// letter lost before it is `manning`; `lader`, `ruting`), nor for a string with a name's marks
/// (a capital, a possessive: `Nevile Henderson`). `None` without
/// [`super::Params::slip_usage_margin`]. The edit costs it computes are kept in `channel`.
fn slipped_from(
    r: &Repairer,
    w: &QueryWord,
    found: &[(u32, u8)],
    channel: &mut [Option<f32>],
) -> Option<u32> {
    r.params.slip_usage_margin?;
    if w.capitalised || w.possessive {
        return None;
    }
    let typed = w.lower.as_bytes();
    let slip_of = |id: u32| {
        let meant = r.candidates.word(id).as_bytes();
        meant.len() == typed.len() + 1 && doubling_lost(typed, meant)
            || swapped_after_first(typed, meant)
    };
    // The likeliest word is weighed (an edit's cost each) only where a slip makes one.
    if !found.iter().any(|&(id, d)| d == 1 && slip_of(id)) {
        return None;
    }
    likeliest_one_edit(r, typed, found, channel).filter(|&id| slip_of(id))
}

/// [`written_far_more`] with the edit's cost computed by `channel`, only when needed.
fn written_far_more_with(
    r: &Repairer,
    typed: &str,
    meant_id: u32,
    margins: UsageMargin,
    channel: impl FnOnce() -> f64,
) -> bool {
    let meant = r.candidates.word(meant_id);
    let short = margins.short;
    let margin = if typed.len() >= r.params.long_word {
        r.params.typo_usage_margin
    } else if error_model::y_kept_before_ending(typed.as_bytes(), meant.as_bytes()) {
        // A word's form spelt wrong, as a variant is, where a short string beside a word is
        // more often a name.
        r.params.variant_usage_margin.min(short)
    } else if margins.slipped == Some(meant_id) {
        r.params.slip_usage_margin.map_or(short, |m| m.min(short))
    } else {
        short
    };
    if !r.has_usage() || !margin.is_finite() {
        return false;
    }
    let Some(ln_meant) = r.candidate_usage(meant_id).map(ln_usage) else {
        return false;
    };
    let ln_typed = r.ln_usage(typed).unwrap_or(-(1e9f64).ln());
    // The edit's cost is never negative: without it the margin is the most it could clear.
    if ln_meant - ln_typed <= margin {
        return false;
    }
    ln_meant - channel() - ln_typed > margin
}

/// Whether `typed` keeps `meant`'s first and last letters, as people's misspellings of long
/// words do, where names and brands put a letter before or after a word (`usaid`, `vcenter`,
/// `humana`): two keys rolled at one end (`todya`, `ahve`), a silent `e` added (`stomache`)
/// or lost (`befor`), or the first letter of a long word lost (`efinition`, [`first_lost`])
/// count as kept.
fn keeps_ends(t: &[u8], m: &[u8]) -> bool {
    let first_kept = t.first() == m.first() || ends_swapped(t, m, 0) || first_lost(t, m);
    let last_kept = t.last() == m.last()
        || ends_swapped(t, m, t.len().saturating_sub(2))
        || silent_e_added(t, m)
        || silent_e_added(m, t);
    first_kept && last_kept
}

/// Whether `t` (typed) is `m` (meant), a word of seven letters or more, with its first letter
/// left out (`efinition`, `nformation`): the key struck too lightly, where names and brands add
/// letters to a word rather than take its first away.
fn first_lost(t: &[u8], m: &[u8]) -> bool {
    m.len() >= 7 && first_letter_put_back(t, m)
}

/// Whether `m` is `t` with one letter put before it.
fn first_letter_put_back(t: &[u8], m: &[u8]) -> bool {
    m.len() == t.len() + 1 && m[1..] == *t
}

/// Whether `typed` is `meant` with an `e` put after its last consonant (`stomache`,
/// `develope`): English ends so many words in a silent `e` that people add one where none is.
fn silent_e_added(t: &[u8], m: &[u8]) -> bool {
    t.len() == m.len() + 1
        && t.starts_with(m)
        && t.last() == Some(&b'e')
        && m.last().is_some_and(|c| !b"aeiouy".contains(c))
}

/// How a string nobody writes is a word's slip ([`swapped_after_first`], and with
/// [`super::Params::unwritten_respelling`], [`super::Params::unwritten_doubling_moved`] and
/// [`super::Params::unwritten_first_lost`]).
#[derive(Clone, Copy, Default)]
struct Slip {
    /// Two letters after the first swapped (`walmrat`).
    swapped: bool,
    /// The word's sound spelt the error model's rules' way (`fawcet`), one or two edits away.
    respelt: bool,
    /// A letter doubled in another place (`hapenn`), one or two edits away.
    doubled: bool,
    /// A doubled letter written once or a letter written twice (`ferari`; [`doubling_lost`]).
    single: bool,
    /// The first letter of a word of seven letters or more lost (`ervice`; [`first_letter_lost`]).
    first_lost: bool,
    /// A letter inside the word lost (`brusing`; [`inner_letter_lost`]).
    lost: bool,
    /// The word's last letter lost (`stomac`; [`last_letter_lost`]).
    last_lost: bool,
    /// One vowel inside the word written as another (`seleneum`; [`inner_vowel_changed`]):
    /// lifted, never lowered.
    vowel: bool,
    /// One consonant inside the word struck as a consonant next to it on the keyboard
    /// (`mflaren`; [`inner_consonant_keyed`]): lifted, never lowered.
    keyed: bool,
    /// One consonant added inside the word beside a letter next to it on the keyboard
    /// (`selpfie`; [`inner_consonant_struck_beside`]): lifted, never lowered.
    key_added: bool,
    /// The word's sound written by ear, three or more edits away (`nessisary`;
    /// [`super::Params::sound_letters`]): lowered as a doubling moved is, never lifted.
    sounded: bool,
}

/// Whether `typed` is `meant` with a letter doubled in another place, the letters the same and
/// in the same order once each doubled one is written once (`hapenn` for `happen`, `dissmis`
/// for `dismiss`, `scrren` for `screen`).
fn doubling_moved(typed: &[u8], meant: &[u8]) -> bool {
    fn once(s: &[u8]) -> impl Iterator<Item = u8> + '_ {
        s.iter()
            .enumerate()
            .filter(|&(i, c)| i == 0 || s[i - 1] != *c)
            .map(|(_, &c)| c)
    }
    typed.len() == meant.len() && typed != meant && once(typed).eq(once(meant))
}

/// Whether `typed` is `meant` with one of its doubled letters written once (`ferari` for
/// `ferrari`), or with one of its letters written twice (`untill` for `until`).
fn doubling_lost(typed: &[u8], meant: &[u8]) -> bool {
    let (short, long) = if typed.len() < meant.len() {
        (typed, meant)
    } else {
        (meant, typed)
    };
    long.len() == short.len() + 1
        && (1..long.len()).any(|i| {
            long[i] == long[i - 1] && long[..i] == short[..i] && long[i + 1..] == short[i..]
        })
}

/// Whether a word is capitalised, or stands beside a capitalised word that no list holds: a
/// name's part as often as a slip (`Edward Dorins`, `Chelidonura varians`).
fn beside_a_name(w: &QueryWord, prev: Option<&QueryWord>, next: Option<&QueryWord>) -> bool {
    let unknown_capitalised = |q: &QueryWord| q.capitalised && !q.stats.known();
    w.capitalised || prev.is_some_and(unknown_capitalised) || next.is_some_and(unknown_capitalised)
}

/// Whether `typed` is `meant` with one letter left out, neither its first nor its last
/// (`brusing` for `bruising`).
fn inner_letter_lost(typed: &[u8], meant: &[u8]) -> bool {
    meant.len() == typed.len() + 1
        && (1..meant.len() - 1).any(|i| meant[..i] == typed[..i] && meant[i + 1..] == typed[i..])
}

/// Whether `typed` is `meant` with one vowel inside it, neither its first letter nor its last,
/// written as another of `a`, `e` and `i` (`seleneum` for `selenium`, `workar` for `worker`,
/// `vinigar` for `vinegar`), or `i` and `y` for each other (`sistemic`, `synonims`): the
/// letters English spells its unstressed vowel with, and two that spell one sound, where `o`
/// and `u` for another vowel make names as often (`canopius`, `Suponin`, `Scopula`).
fn inner_vowel_changed(typed: &[u8], meant: &[u8]) -> bool {
    const VOWELS: &[u8] = b"aei";
    let vowel = |c: u8| VOWELS.contains(&c);
    typed.len() == meant.len()
        && typed.len() > 2
        && typed[0] == meant[0]
        && typed.last() == meant.last()
        && typed
            .iter()
            .zip(meant)
            .filter(|(a, b)| a != b)
            .all(|(&a, &b)| vowel(a) && vowel(b) || matches!((a, b), (b'y', b'i') | (b'i', b'y')))
        && typed.iter().zip(meant).filter(|(a, b)| a != b).count() == 1
}

/// Whether `typed` is `meant` with one consonant inside it, neither its first letter nor its
/// last, struck as a consonant next to it on the keyboard (`mflaren` for `mclaren`, `inpacted`
/// for `impacted`): a slip of the typing hand, where a vowel for a key beside it is as often a
/// vowel spelt wrong.
fn inner_consonant_keyed(typed: &[u8], meant: &[u8]) -> bool {
    let consonant = |c: u8| c.is_ascii_lowercase() && !b"aeiou".contains(&c);
    let mut differ = typed
        .iter()
        .zip(meant)
        .enumerate()
        .filter(|(_, (a, b))| a != b);
    typed.len() == meant.len()
        && typed.len() > 2
        && differ.next().is_some_and(|(i, (&a, &b))| {
            i > 0
                && i + 1 < typed.len()
                && consonant(a)
                && consonant(b)
                && error_model::adjacent(a, b)
        })
        && differ.next().is_none()
}

/// Whether `typed` is `meant` with one consonant added inside it, beside a letter it is next
/// to on the keyboard and unlike either neighbour (`selpfie` for `selfie`): a finger that
/// struck two keys, where a vowel added is as often a name's (`canopius`).
fn inner_consonant_struck_beside(typed: &[u8], meant: &[u8]) -> bool {
    let consonant = |c: u8| c.is_ascii_lowercase() && !b"aeiou".contains(&c);
    typed.len() == meant.len() + 1
        && typed.len() > 2
        && (1..typed.len() - 1).any(|i| {
            let (c, before, after) = (typed[i], typed[i - 1], typed[i + 1]);
            typed[..i] == meant[..i]
                && typed[i + 1..] == meant[i..]
                && consonant(c)
                && c != before
                && c != after
                && (error_model::adjacent(c, before) || error_model::adjacent(c, after))
        })
}

/// The candidate one edit from `typed` that the usage list and the error model together find
/// likeliest (its writings less the edit's cost), of those the usage list holds: the word a
/// short slip means where several are one edit away (`acuse` is `cause` two letters swapped
/// before it is `accuse` with a letter lost). The edit costs it computes are kept in `channel`
/// (one slot per candidate of `found`, as [`typo_of_a_written_word`] keeps them).
fn likeliest_one_edit(
    r: &Repairer,
    typed: &[u8],
    found: &[(u32, u8)],
    channel: &mut [Option<f32>],
) -> Option<u32> {
    found
        .iter()
        .zip(channel)
        .filter(|(&(_, d), _)| d == 1)
        .filter_map(|(&(id, _), slot)| {
            let meant = r.candidates.word(id).as_bytes();
            r.candidate_usage(id).map(|u| {
                let edit = *slot.get_or_insert_with(|| error_model::cost(typed, meant));
                (super::ln_usage(u) - f64::from(edit), id)
            })
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, id)| id)
}

/// Whether `typed` is `meant` with its last letter lost (`stomac` for `stomach`), where the
/// word after does not begin with that letter (`lovelan d`, `hedgeho glitters`: a word broken
/// or run into the next, which the join and the split read), and not a `g` after `in`: the
/// `-in'` of speech is written so on purpose (`overhaulin`, `lovin`).
fn last_letter_lost(after: Option<&str>, typed: &[u8], meant: &[u8]) -> bool {
    let Some((&last, stem)) = meant.split_last() else {
        return false;
    };
    stem == typed
        && !(last == b'g' && typed.ends_with(b"in"))
        && after.is_none_or(|a| a.as_bytes().first() != Some(&last))
}

/// Whether `typed` is `meant` with its first letter lost ([`first_lost`]) where the word before
/// it is not that letter alone: `a ccounts` is a word broken after its first letter, which the
/// join reads, not `a` before `accounts` with its `a` lost.
fn first_letter_lost(before: Option<&str>, typed: &[u8], meant: &[u8], min_letters: usize) -> bool {
    meant.len() >= min_letters
        && first_letter_put_back(typed, meant)
        && before.is_none_or(|b| b.as_bytes() != &meant[..1])
}

/// Whether `typed` is `meant` with two adjacent letters swapped, not the first (`walmrat` for
/// `walmart`).
fn swapped_after_first(typed: &[u8], meant: &[u8]) -> bool {
    let at = typed.iter().zip(meant).take_while(|(a, b)| a == b).count();
    at > 0 && ends_swapped(typed, meant, at)
}

/// Whether `typed` is `meant` with the two letters from `at` swapped and every other letter in
/// place (`todya` for `today` at 3, `ahve` for `have` at 0).
fn ends_swapped(typed: &[u8], meant: &[u8], at: usize) -> bool {
    let n = typed.len();
    n >= 3
        && n == meant.len()
        && at + 1 < n
        && typed[at] == meant[at + 1]
        && typed[at + 1] == meant[at]
        && typed[..at] == meant[..at]
        && typed[at + 2..] == meant[at + 2..]
}

/// A short unknown word read as a function word with a letter dropped (`whn`, `wer`, `wil`), or
/// with another slip when the usage list says the string is that word's typo (`teh`, `adn`).
/// Other short unknown words are mostly acronyms (`irs`, `tsa`, and `hsa`, which is `has` with two
/// letters swapped), so nothing else is tried. Also says whether the usage list reads the string
/// as the typo of one of the words returned (written e^[`super::Params::short_typo_usage_margin`]
/// times less, after the slip's cost).
fn function_word_slips(
    r: &Repairer,
    w: &QueryWord,
    extra: f64,
    lookups: &mut Lookups,
) -> (Vec<Reading>, bool) {
    let found = lookups.get(r, &w.lower, 1);
    let typed = w.lower.as_bytes();
    let ln_typed = r.ln_usage(&w.lower).unwrap_or(-(1e9f64).ln());
    let mut typo = false;
    let slips = found
        .iter()
        .filter_map(|&(id, d)| {
            let meant = r.candidates.word(id);
            let m = meant.as_bytes();
            if !is_stopword(meant) {
                return None;
            }
            let dropped = m.len() == typed.len() + 1;
            // A letter for another or two swapped after the first (`teh`, `adn`), or the first
            // two swapped, only when the function word is written so much more that the
            // string's own writings are its typos; `hsa` is written as an acronym, `nad` too.
            // A stray letter is mostly one (`inu`, `tpo`).
            // The first two letters swapped keep the first letter, struck a key late (`ohw`).
            let same_shape = m.len() == typed.len()
                && (m.first() == typed.first()
                    || (m.len() >= 2 && m[0] == typed[1] && m[1] == typed[0]));
            if !dropped && !same_shape {
                return None;
            }
            let channel = f64::from(error_model::cost(typed, m));
            let written_as_typo = r
                .ln_usage(meant)
                .is_some_and(|ln| ln - channel - ln_typed > r.params.short_typo_usage_margin);
            if !dropped && !written_as_typo {
                return None;
            }
            typo |= written_as_typo;
            Some(Reading {
                span: 1,
                words: smallvec![(meant.into(), r.candidate_stats[id as usize])],
                cost: channel + extra,
                kind: Some(EditKind::NonWord),
                distance: d,
            })
        })
        .collect();
    (slips, typo)
}

/// A short unknown word read as a content word with a letter dropped when the corpus writes that
/// word beside one of the query's words next to it (`robert gra` for `robert gray`, `lfe cycle`
/// for `life cycle`): the corpus pair, not the string, says which word was meant, so an acronym
/// the corpus never pairs that way (`rsa definition`) is left alone. So too, for a letter
/// dropped or one slip of the hand (two letters swapped, a key next to the right one), where
/// general English's pair list holds the word with every known word beside it, function words
/// too, in a set phrase with one, and the word list lacks the string
/// ([`super::Params::three_letter_set_phrases`]: `how to fnd the` → `find`, `theraderm ued
/// for` → `used`, `how to get ric of` → `rid`).
fn three_letter_content_words(
    r: &Repairer,
    w: &QueryWord,
    prev: Option<&QueryWord>,
    next: Option<&QueryWord>,
    extra: f64,
    lookups: &mut Lookups,
) -> Vec<Reading> {
    let p = &r.params;
    fn beside(q: Option<&QueryWord>, spaced: bool) -> Option<&QueryWord> {
        q.filter(|q| spaced && q.editable && q.stats.general > 0)
    }
    let general_prev = beside(prev, w.spaced_from_previous);
    let general_next = beside(next, next.is_some_and(|q| q.spaced_from_previous));
    // With one neighbour at least it makes a set phrase, written e^`set_phrase_over_chance`
    // times more than chance ([`super::Params::set_phrase_over_chance`]): any word pairs with a
    // function word (`what is bst in` is no `best in`), few as often as `to find`, `used for`.
    let phrase = p.set_phrase_over_chance;
    let set_phrase = |pair: Option<(&WordStats, &WordStats)>| {
        pair.and_then(|(a, b)| r.lm.ln_general_over_chance(a, b))
            .unwrap_or(f64::NEG_INFINITY)
    };
    // Nor a piece of a word broken in two whose other piece stands beside it (`sho pify`,
    // `kil owatt`): the join says which word.
    let joins_unknown = [
        prev.filter(|_| w.spaced_from_previous)
            .map(|q| format!("{}{}", q.lower, w.lower)),
        next.filter(|q| q.spaced_from_previous)
            .map(|q| format!("{}{}", w.lower, q.lower)),
    ]
    .into_iter()
    .zip([prev, next])
    .any(|(joined, q)| {
        q.is_some_and(|q| !q.stats.known())
            && joined.is_some_and(|j| r.lm.stats(&j).known() || r.lm.usage(&j).is_some())
    });
    let general = p.three_letter_set_phrases
        && !joins_unknown
        && w.stats.general == 0
        && r.lm.has_general_bigrams()
        && (general_prev.is_some() || general_next.is_some());
    let prev = context_word(prev.filter(|_| w.spaced_from_previous));
    let next = context_word(next.filter(|q| q.spaced_from_previous));
    let corpus = (prev.is_some() || next.is_some()) && r.vocab.has_bigrams();
    if !corpus && !general {
        return Vec::new();
    }
    let typed = w.lower.as_bytes();
    lookups
        .get(r, &w.lower, 1)
        .iter()
        .filter_map(|&(id, d)| {
            let meant = r.candidates.word(id);
            let dropped = meant.len() == typed.len() + 1;
            let slipped = meant.len() == typed.len()
                && error_model::slip_of_the_hand(typed, meant.as_bytes());
            if !(dropped || slipped) || is_stopword(meant) {
                return None;
            }
            let stats = &r.candidate_stats[id as usize];
            let written = if corpus && dropped {
                prev.map_or(0, |q| r.vocab.bigram(&q.lower, meant))
                    + next.map_or(0, |q| r.vocab.bigram(meant, &q.lower))
            } else {
                0
            };
            let paired = general
                && general_prev.is_none_or(|q| r.lm.general_pair_count(&q.stats, stats) > 0)
                && general_next.is_none_or(|q| r.lm.general_pair_count(stats, &q.stats) > 0)
                && set_phrase(general_prev.map(|q| (&q.stats, stats)))
                    .max(set_phrase(general_next.map(|q| (stats, &q.stats))))
                    >= phrase;
            (written >= p.min_corpus_count || paired).then(|| Reading {
                span: 1,
                words: smallvec![(meant.into(), r.candidate_stats[id as usize])],
                cost: f64::from(error_model::cost(typed, meant.as_bytes())) + extra,
                kind: Some(EditKind::NonWord),
                distance: d,
            })
        })
        .collect()
}

/// A string of two or three letters read as a word one edit away that at least half the
/// documents the query retrieved use and none the string ([`super::Params::short_word_vote`]):
/// too short for the lists to tell an acronym from a slip (`gow`, `sou`, `cey`), where the
/// documents about the rest of the query say which word it is. A known string pays the
/// real-word cost besides (`row` for `grow`).
fn voted_short_words(
    r: &Repairer,
    w: &QueryWord,
    at: usize,
    vote: &Vote<'_>,
    lookups: &mut Lookups,
) -> Vec<Reading> {
    let p = &r.params;
    if vote.retrieved.is_none()
        || p.short_word_vote <= 0.0
        || !w.lower.bytes().all(|b| b.is_ascii_lowercase())
        || is_stopword(&w.lower)
        || vote.uses(&w.lower)
    {
        return Vec::new();
    }
    let word = w.stats.known();
    let known = if word { p.real_word_cost } else { 0.0 };
    let typed = w.lower.as_bytes();
    lookups
        .get(r, &w.lower, 1)
        .iter()
        .filter_map(|&(id, distance)| {
            let meant = r.candidates.word(id);
            let stats = r.candidate_stats[id as usize];
            (meant.len() >= 3
                && !is_stopword(meant)
                && vote.agrees_on(at, &w.lower, meant, stats.corpus))
            .then(|| Reading {
                span: 1,
                words: smallvec![(meant.into(), stats)],
                cost: f64::from(error_model::cost(typed, meant.as_bytes())) + known
                    - p.short_word_vote,
                kind: Some(if word {
                    EditKind::RealWord
                } else {
                    EditKind::NonWord
                }),
                distance,
            })
        })
        .collect()
}

/// Prefixes of four letters or more that English makes new words with, which the lists hold
/// as words of their own: a string nobody writes that starts with one is more often such a word
/// than two words run together.
const WORD_FORMING_PREFIXES: &[&str] = &[
    "anti", "auto", "counter", "cyber", "extra", "hyper", "hypo", "inter", "intra", "macro",
    "mega", "micro", "mini", "multi", "over", "post", "semi", "super", "tele", "trans", "ultra",
    "under",
];

/// Prefixes English makes words with that are too short to split at
/// ([`WORD_FORMING_PREFIXES`]).
const SHORT_PREFIXES: &[&str] = &[
    "a", "an", "bi", "co", "de", "dis", "en", "il", "im", "in", "ir", "mis", "non", "pre", "pro",
    "re", "sub", "tri", "un",
];

/// Whether `word` is a word of the general lists, or a prefix English makes words with, put
/// before another (`latitudeis`, `grantstand`; `anhydrate`): words run together or a word the
/// lists lack, not a typo of one word.
fn listed_words_run_together(r: &Repairer, word: &str) -> bool {
    let listed = |s: &str| r.lm.stats(s).general > 0 && (s.len() >= 3 || is_stopword(s));
    let prefixed = WORD_FORMING_PREFIXES
        .iter()
        .chain(SHORT_PREFIXES)
        .filter_map(|p| word.strip_prefix(p))
        .any(|rest| rest.len() >= 4 && r.lm.stats(rest).general > 0);
    prefixed
        || (2..word.len().saturating_sub(1))
            .filter(|&k| word.is_char_boundary(k))
            .any(|k| listed(&word[..k]) && listed(&word[k..]))
}

/// Where [`splits`] may read the article `a` run into the word after it.
#[derive(Clone, Copy)]
enum ArticleSplit {
    /// Nowhere: the word before does not want the article, or at a phrase's start no word
    /// follows in the same phrase.
    No,
    /// After a word of the same phrase that goes with the article
    /// ([`super::Params::article_split_association`]).
    AfterWord,
    /// At a phrase's start ([`super::Params::article_split_at_start`]) or after a word that
    /// does not want the article ([`super::Params::article_split_by_next_word`]), where the
    /// word after goes with the word split off as the word before must with the article
    /// ([`super::Params::article_split_association`]: `lot of`).
    ByNextWord { least: f64, next: WordStats },
}

/// Splits of an unknown word into two known ones (or a function word and an acronym people
/// write), the likeliest first, then, if `three_words`, its likeliest split into three
/// ([`super::Params::three_word_split_letters`]). `article` says where the article `a` may be
/// read run into the word's start, `article_at_end` whether into its end (the next word takes
/// it); `near_word` says a word of the lists is one edit from the string.
fn splits(
    r: &Repairer,
    word: &str,
    beside_unknown: bool,
    three_words: bool,
    article: ArticleSplit,
    article_at_end: bool,
    near_word: bool,
) -> Vec<Reading> {
    let mut v: Vec<(f64, Reading)> = Vec::new();
    // Nobody writes the string, and each piece is a written word long enough to be no fragment.
    let unwritten = !beside_unknown && r.lm.has_usage() && !r.written(word);
    let written_part = |s: &str, least: usize| s.len() >= least && r.lm.usage(s).is_some();
    // In a split into two, a written piece of three letters will do (`netgain`, `thirdlaw`,
    // `buycars`), where no word is one edit from the string: such a string is as often that
    // word's typo (`richadd`, `lateway`, `workoun`); in three pieces, short ones make names
    // of words (`badminto` is no `bad min to`).
    let short_least = match r.params.unwritten_compound_short_letters {
        0 => r.params.unwritten_compound_letters,
        _ if near_word => r.params.unwritten_compound_letters,
        n => n.min(r.params.unwritten_compound_letters),
    };
    // English builds words the lists lack from these (`hypofunction`, `microfeed`, `protime`).
    let word_forming = |s: &str| WORD_FORMING_PREFIXES.contains(&s) || SHORT_PREFIXES.contains(&s);
    // A function word and a short content word is more often a name (`san to`, `in ola`) than
    // two words run together, unless nobody writes the string and the short word is one people
    // write often (an acronym: `of dna`, `the tv`).
    let acronym = |y: &str| {
        let least = r.params.acronym_piece_usage;
        unwritten && least > 0 && r.lm.usage(y).is_some_and(|u| u >= least)
    };
    let short_content = |x: &str, y: &str| is_stopword(x) && !is_stopword(y) && y.len() < 4;
    // Whether two pieces may stand side by side in a split: no function word beside a short
    // content word (unless an acronym), and pieces of one or two letters only where they are
    // function words (`is`, `of`) or acronyms beside one (`the tv`); single letters are left
    // out (`human a`, `a plastic`) but for the article before a word (`article`, below).
    //
    // The article run into the word after it (`alot`, `agenre`), where the caller's `article`
    // allows it: a word of three letters or more that starts with a consonant (`a average` is
    // no English, `aaverage` a slip). It stands so in a three-word split too (`are onasingle`
    // → `on a single`). A string people write is split only where the pair list writes the two
    // words far more; at a phrase's start, or after a word that does not want the article,
    // only such a string is, and only where the word after goes with the word the article is
    // split from (`Alot of`, `Nowadays alot of`: `lot of`; `aplastic anemia` is no `a plastic`).
    let article = |a: &str, b: &str| {
        let written_apart = |u| r.written_apart_as(u, a, b, r.params.article_written_apart_margin);
        a == "a"
            && b.len() >= 3
            && !is_stopword(b)
            && !b.starts_with(['a', 'e', 'i', 'o', 'u'])
            && match article {
                ArticleSplit::No => false,
                ArticleSplit::AfterWord => r.lm.usage(word).is_none_or(written_apart),
                ArticleSplit::ByNextWord { least, next } => {
                    r.lm.usage(word).is_some_and(written_apart)
                        && r.lm
                            .ln_general_over_chance(&r.lm.stats(b), &next)
                            .is_some_and(|x| x >= least)
                }
            }
    };
    // The article run into the end of a word that goes with it (`doesa psychotherapist`,
    // `withouta cosigner`), where nobody writes the string and the next word takes the
    // article: a name or a term the lists lack ends so too (`kinecta`), but is seldom a word
    // general English writes before the article.
    let article_after = |a: &str, b: &str| {
        b == "a"
            && article_at_end
            && r.lm.usage(word).is_none()
            && r.params.article_split_association.is_some_and(|least| {
                r.lm.ln_general_over_chance(&r.lm.stats(a), &r.lm.stats(b))
                    .is_some_and(|x| x >= least)
            })
    };
    // A string too short for other splits is read only so.
    let short = word.len() < r.params.min_split_letters;
    let side_by_side = |a: &str, b: &str| {
        let ok = |x: &str, y: &str| {
            x.len() >= 3 || (x.len() == 2 && (is_stopword(x) || (is_stopword(y) && acronym(x))))
        };
        let short_beside = |x: &str, y: &str| short_content(x, y) && !acronym(y);
        article(a, b)
            || !short && article_after(a, b)
            || !short && !short_beside(a, b) && !short_beside(b, a) && ok(a, b) && ok(b, a)
    };
    // An acronym beside a function word is a piece where the usage list alone knows it (`the
    // tv`: neither the lexicon nor every corpus holds `tv`).
    let piece =
        |s: &WordStats, x: &str, y: &str| r.usable(s) || (short_content(y, x) && acronym(x));
    // Two content words may be a compound the lists lack (`handwashing`): they pay more. So do
    // two function words, which the language model finds likely anywhere (`befor` is `before`
    // with its `e` lost far more often than `be for`).
    let compound_of = |a: &str, b: &str, least: usize| match (is_stopword(a), is_stopword(b)) {
        (false, false)
            if unwritten
                && written_part(a, least)
                && written_part(b, least)
                && !word_forming(a) =>
        {
            r.params.compound_split_cost - r.params.unwritten_compound_bonus
        }
        (false, false) => r.params.compound_split_cost,
        (true, true) => r.params.function_split_cost,
        _ => 0.0,
    };
    let compound = |a: &str, b: &str| compound_of(a, b, r.params.unwritten_compound_letters);
    // A word of general English with an `s` after it is that word's plural, or its possessive
    // written without the apostrophe (`in todays world`), not a function word run into
    // another word's plural (`to days`).
    let apostrophe_lost = word
        .strip_suffix('s')
        .is_some_and(|stem| stem.len() >= 3 && r.lm.stats(stem).general > 0);
    // A string people write is split only where the two words are written apart far more
    // (`easton` is no `east on`); the article's split weighs this itself (`article`).
    let written = r.params.written_split_margin.zip(r.lm.usage(word));
    let written_for_itself = |a: &str, b: &str| {
        written.is_some_and(|(margin, u)| !r.written_apart_as(u, a, b, margin)) && !article(a, b)
    };
    let cuts = || (1..word.len()).filter(|&k| word.is_char_boundary(k));
    for k in cuts() {
        let (a, b) = word.split_at(k);
        if !side_by_side(a, b)
            || apostrophe_lost && is_stopword(a) && !is_stopword(b)
            || written_for_itself(a, b)
        {
            continue;
        }
        let (sa, sb) = (r.lm.stats(a), r.lm.stats(b));
        if !piece(&sa, a, b) || !piece(&sb, b, a) {
            continue;
        }
        let score = r.lm.ln_unigram(&sa) + r.lm.ln_bigram(a, &sa, b, &sb);
        v.push((
            -score,
            Reading {
                span: 1,
                words: smallvec![(a.into(), sa), (b.into(), sb)],
                cost: r.params.split_cost + compound_of(a, b, short_least),
                kind: Some(EditKind::Split),
                distance: 1,
            },
        ));
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.truncate(3);
    // Three words run together (`bankofamerica`, `howtomake`): only where nobody writes the
    // string, and where general English writes at least one of the two adjacent pairs often
    // enough for the pair list to hold it. A piece of two letters is a function word here, never
    // an acronym (`rest or il` is no reading of `restoril`).
    let least = r.params.three_word_split_letters;
    if three_words && unwritten && least > 0 && word.len() >= least && r.lm.has_general_bigrams() {
        let mut three: Option<(f64, Reading)> = None;
        for k in cuts() {
            let (a, rest) = word.split_at(k);
            let sa = r.lm.stats(a);
            if !r.usable(&sa) {
                continue;
            }
            for j in (1..rest.len()).filter(|&j| rest.is_char_boundary(j)) {
                let (b, c) = rest.split_at(j);
                // A word of the lists across a cut is one piece, not two (`intomusic` is
                // `into music`, not `in to music`).
                let listed = |s: &str| r.lm.stats(s).general > 0;
                let acronym_piece = [a, b, c].iter().any(|x| x.len() < 3 && !is_stopword(x));
                if acronym_piece || listed(&word[..k + j]) || listed(rest) {
                    continue;
                }
                let (sb, sc) = (r.lm.stats(b), r.lm.stats(c));
                // The article `a` is a piece beside a function word it is written after or
                // before often (`what is a`, `definition of a`).
                let article = |x: &str, y: &str, sx: &WordStats, sy: &WordStats| {
                    (x == "a" || y == "a")
                        && is_stopword(x)
                        && is_stopword(y)
                        && r.lm.general_pair_known(sx, sy)
                };
                if !(side_by_side(a, b) || article(a, b, &sa, &sb))
                    || !(side_by_side(b, c) || article(b, c, &sb, &sc))
                    || !r.usable(&sb)
                    || !r.usable(&sc)
                    || !(r.lm.general_pair_known(&sa, &sb) || r.lm.general_pair_known(&sb, &sc))
                {
                    continue;
                }
                let score = r.lm.ln_unigram(&sa)
                    + r.lm.ln_bigram(a, &sa, b, &sb)
                    + r.lm.ln_bigram(b, &sb, c, &sc);
                if three.as_ref().is_none_or(|t| -score < t.0) {
                    three = Some((
                        -score,
                        Reading {
                            span: 1,
                            words: smallvec![(a.into(), sa), (b.into(), sb), (c.into(), sc),],
                            cost: 2.0 * r.params.split_cost + compound(a, b) + compound(b, c),
                            kind: Some(EditKind::Split),
                            distance: 2,
                        },
                    ));
                }
            }
        }
        v.extend(three);
    }
    v.into_iter().map(|x| x.1).collect()
}

/// A short string the lists do not know as a word read as a function word and the article run
/// together (`what isa priority` → `is a`, `in place ofa coffee filter` → `of a`;
/// [`super::Params::function_word_article_association`]): the word before, in the same phrase,
/// goes with the function word and the function word with the article, and the word after
/// takes the article (`a` before a consonant, `an` before a vowel). Such strings are mostly
/// acronyms and names people write (`ISA`, `OFA`), so nothing else speaks for the split.
fn function_word_and_article(
    r: &Repairer,
    w: &QueryWord,
    prev: Option<&QueryWord>,
    next: Option<&QueryWord>,
) -> Option<Reading> {
    let least = r.params.function_word_article_association?;
    let (prev, next) = (prev?, next?);
    let article = ["an", "a"]
        .into_iter()
        .find(|a| w.lower.len() > a.len() + 1 && w.lower.ends_with(a))?;
    let function_word = &w.lower[..w.lower.len() - article.len()];
    let starts_with_vowel = next.lower.starts_with(['a', 'e', 'i', 'o', 'u']);
    let takes_article = !is_stopword(&next.lower)
        && next.lower.starts_with(|c: char| c.is_ascii_alphabetic())
        && starts_with_vowel == (article == "an");
    let (sf, sa) = (r.lm.stats(function_word), r.lm.stats(article));
    let goes_with = |a: &WordStats, b: &WordStats| {
        r.lm.ln_general_over_chance(a, b)
            .is_some_and(|x| x >= least)
    };
    (is_stopword(function_word)
        && !w.ends_phrase
        && !prev.ends_phrase
        && next.spaced_from_previous
        && takes_article
        && goes_with(&prev.stats, &sf)
        && goes_with(&sf, &sa))
    .then(|| Reading {
        span: 1,
        words: smallvec![(function_word.into(), sf), (article.into(), sa)],
        cost: r.params.split_cost + r.params.function_split_cost,
        kind: Some(EditKind::Split),
        distance: 1,
    })
}

/// Function words a name follows (prepositions, `is`, `and`, `the`), for
/// [`super::Params::function_word_run_into_name_usage`].
const WORDS_BEFORE_NAMES: &[&str] = &[
    "about", "and", "are", "at", "by", "for", "from", "in", "into", "is", "of", "on", "the", "to",
    "was", "with",
];

/// Whether `piece` of a string reads as a name people write: written at least `least_usage`
/// times per billion words but in no word list or the corpus, no prefix English makes words
/// with, and the beginning of no more than [`super::Params::name_run_into_word_beginnings`]
/// listed words (`simpli` is a piece of `simplify`).
fn written_name(r: &Repairer, piece: &str, stats: &WordStats, least_usage: u64) -> bool {
    stats.general == 0
        && !r.usable(stats)
        && r.lm.usage(piece).is_some_and(|u| u >= least_usage)
        && !WORD_FORMING_PREFIXES.contains(&piece)
        && r.lexicon.as_ref().is_some_and(|l| {
            l.words_beginning_with(piece) <= r.params.name_run_into_word_beginnings
        })
}

/// A string nobody writes read as a name people write run into a common word after it
/// (`tristessedefinition`, `cmcprogram`; [`super::Params::name_run_into_word_usage`]), as a
/// function word run into a name (`fromhemorrhoid`, `torestasis`;
/// [`super::Params::function_word_run_into_name_usage`]) or as a common word run into a name
/// (`tricuspidatresia`; [`super::Params::word_run_into_name_usage`]). The name stays an unknown
/// word.
fn name_run_into_word(r: &Repairer, word: &str, beside_unknown: bool) -> Option<Reading> {
    let p = &r.params;
    if beside_unknown || r.lm.usage(word).is_some() {
        return None;
    }
    let reading = |a: &str, sa: WordStats, b: &str, sb: WordStats| Reading {
        span: 1,
        words: smallvec![(a.into(), sa), (b.into(), sb)],
        cost: p.split_cost,
        kind: Some(EditKind::Split),
        distance: 1,
    };
    if p.function_word_run_into_name_usage > 0 {
        for opener in WORDS_BEFORE_NAMES {
            let Some(name) = word.strip_prefix(opener).filter(|n| n.len() >= 4) else {
                continue;
            };
            let sn = r.lm.stats(name);
            if written_name(r, name, &sn, p.function_word_run_into_name_usage) {
                return Some(reading(opener, r.lm.stats(opener), name, sn));
            }
        }
    }
    if p.name_run_into_word_usage == 0 {
        return None;
    }
    // A word of the lists people write often, of `name_run_into_word_letters` or more.
    let common = |x: &str, s: &WordStats| {
        x.len() >= p.name_run_into_word_letters
            && s.general > 0
            && !is_stopword(x)
            && r.lm
                .usage(x)
                .is_some_and(|u| u >= p.name_run_into_word_usage)
    };
    let cuts = || (3..word.len().saturating_sub(2)).filter(|&k| word.is_char_boundary(k));
    for k in cuts() {
        let (name, after) = word.split_at(k);
        let (sn, sa) = (r.lm.stats(name), r.lm.stats(after));
        if common(after, &sa) && written_name(r, name, &sn, 1) {
            return Some(reading(name, sn, after, sa));
        }
    }
    // The word first (`tricuspidatresia`): a name of four letters or more, after a word that
    // is no prefix English makes words with (`interstim`).
    if p.word_run_into_name_usage > 0 {
        for k in cuts().filter(|&k| word.len() - k >= 4) {
            let (before, name) = word.split_at(k);
            let (sb, sn) = (r.lm.stats(before), r.lm.stats(name));
            if common(before, &sb)
                && !WORD_FORMING_PREFIXES.contains(&before)
                && written_name(r, name, &sn, p.word_run_into_name_usage)
            {
                return Some(reading(before, sb, name, sn));
            }
        }
    }
    None
}

/// Whether an unknown word with these `splits` reads as words run together: nobody writes it,
/// and its likeliest split does not begin with a piece English builds words from (`over packs`
/// for `overpacks`).
fn run_together(r: &Repairer, word: &str, splits: &[Reading]) -> bool {
    let Some(first) = splits.first().and_then(|s| s.words.first()) else {
        return false;
    };
    r.lm.has_usage() && !r.written(word) && !WORD_FORMING_PREFIXES.contains(&first.0.as_str())
}

/// Whether an unknown `typed` word is another spelling or another form of `meant`, which is
/// the typist's choice, not an error: a spelling variant or an inflection, unless the usage list
/// says people write `typed` so much less than `meant` that its writings are typos of it
/// ([`super::Params::variant_usage_margin`]: `controled`, `develope`). A string nobody writes
/// is not judged so (a form the lists lack, `chatbots`), nor is a word shorter than
/// [`super::Params::two_edits_from`] (`ther` is no typo of `the`).
fn another_form(r: &Repairer, typed: &str, meant: &str) -> bool {
    if !spelling_variant(typed, meant) && !inflected_form(typed, meant) {
        return false;
    }
    if typed.len() < r.params.two_edits_from {
        return true;
    }
    match (r.ln_usage(typed), r.ln_usage(meant)) {
        (Some(t), Some(m)) => m - t <= r.params.variant_usage_margin,
        // Every accepted spelling of a word people write is written too (`theatre`, `colour`):
        // one nobody writes is a slip (`numbre`), as an inflection nobody writes need not be
        // (a rare word's plural).
        (None, Some(_)) => !spelling_variant(typed, meant) || inflected_form(typed, meant),
        _ => true,
    }
}

/// Whether two words are the American and British spellings of one word (`color`/`colour`,
/// `theater`/`theatre`, `traveled`/`travelled`, `organize`/`organise`): neither is an error.
pub(crate) fn spelling_variant(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.len() == long.len() {
        // -er/-re, -ize/-ise, -yze/-yse (theater/theatre, organize/organise).
        let (x, y) = (a.as_bytes(), b.as_bytes());
        // The first three positions that differ: more than two is no variant.
        let mut diff = [0usize; 3];
        let mut n = 0;
        for i in (0..a.len()).filter(|&i| x[i] != y[i]) {
            diff[n] = i;
            n += 1;
            if n == diff.len() {
                break;
            }
        }
        let vowel = |c: u8| b"aeiou".contains(&c);
        return match &diff[..n] {
            // Only at the end, or before a plural or past ending (`theatres`), and after a
            // consonant; inside a word it is two letters swapped (`hypretrophy`), after a vowel
            // too (`proceduer`).
            [i, j]
                if j == &(i + 1)
                    && *i > 0
                    && !vowel(x[i - 1])
                    && (j + 1 == a.len() || (j + 2 == a.len() && a.ends_with(['s', 'd']))) =>
            {
                x[*i] == y[*j]
                    && x[*j] == y[*i]
                    && matches!((x[*i], x[*j]), (b'e', b'r') | (b'r', b'e'))
            }
            // After `i` or `y` (`organise`, `analyse`); elsewhere it is a slip (`buzy`).
            [i] => {
                *i > 0
                    && matches!(x[i - 1], b'i' | b'y')
                    && matches!((x[*i], y[*i]), (b'z', b's') | (b's', b'z'))
            }
            _ => false,
        };
    }
    if long.len() != short.len() + 1 {
        return false;
    }
    // The one extra letter of the longer word: `u` after `o` (colour), or a doubled `l`
    // (travelled), `e` in -ogue/-og is left out.
    (0..long.len()).any(|i| {
        let (pre, post) = (&long[..i], &long[i + 1..]);
        short.as_bytes().starts_with(pre.as_bytes())
            && short.as_bytes().ends_with(post.as_bytes())
            && match long.as_bytes()[i] {
                // ... in an unstressed -our (`colour`, `favourite`, `neighbourhood`), not
                // inside a stem (`sorce` is a typo of `source`) or in a one-syllable word.
                b'u' => {
                    pre.ends_with('o')
                        && post.starts_with('r')
                        && pre[..pre.len() - 1].contains(['a', 'e', 'i', 'o', 'u', 'y'])
                        && after_our(&post[1..])
                }
                // ... before an ending (`travelled`, `labelling`), not at the end (`untill`).
                b'l' => pre.ends_with('l') && post.starts_with(['e', 'i']),
                // haemorrhage/hemorrhage, oestrogen/estrogen: inside a word; a final `-ae` is a
                // plural or a slip (`definae`).
                b'a' | b'o' => post.starts_with('e') && post.len() > 1,
                // Only after the -in of a word of three syllables or more (`glycerin`,
                // `gelatin`): a final `e` lost elsewhere is a typo (`peopl`, `activ`, `onlin`).
                b'e' => post.is_empty() && pre.ends_with("in") && pre.len() >= 7,
                _ => false,
            }
    })
}

/// The first British spelling [`spelling_variant`] pairs with an American one (`colors` →
/// `colours`, `theater` → `theatre`, `anemia` → `anaemia`, `traveled` → `travelled`,
/// `organize` → `organise`) that `find` finds, with what it found: the word list's id of a
/// spelling where the list lacks the American one.
pub(crate) fn british_spelling<T>(
    american: &str,
    mut find: impl FnMut(&str) -> Option<T>,
) -> Option<T> {
    let b = american.as_bytes();
    let mut out: Vec<Vec<u8>> = Vec::new();
    for i in 0..b.len() {
        match b[i] {
            // -er/-re.
            b'e' if b.get(i + 1) == Some(&b'r') => {
                let mut v = b.to_vec();
                v.swap(i, i + 1);
                out.push(v);
            }
            // -ize/-ise.
            b'z' => {
                let mut v = b.to_vec();
                v[i] = b's';
                out.push(v);
            }
            _ => {}
        }
        // One letter more before this one: `u` in -or, `l` doubled, `a`/`o` before `e`.
        let before = i.checked_sub(1).map(|j| b[j]);
        let mut extra: Vec<u8> = Vec::new();
        if before == Some(b'o') && b[i] == b'r' {
            extra.push(b'u');
        }
        if before == Some(b'l') && matches!(b[i], b'e' | b'i') {
            extra.push(b'l');
        }
        if b[i] == b'e' {
            extra.extend(b"ao");
        }
        for c in extra {
            let mut v = b[..i].to_vec();
            v.push(c);
            v.extend_from_slice(&b[i..]);
            out.push(v);
        }
    }
    // A final `e` after -in (`glycerin`).
    if american.ends_with("in") {
        out.push([b, b"e"].concat());
    }
    // The look-up first: most strings are no word, and telling a spelling costs more.
    out.into_iter()
        .filter_map(|v| String::from_utf8(v).ok())
        .find_map(|s| find(&s).filter(|_| spelling_variant(american, &s)))
}

/// Whether `rest` can follow the `-our` of a British spelling: nothing, a plural, a vowel-led
/// ending (`-ed`, `-ite`, `-able`) or one of the consonant-led suffixes `-ful`, `-less`,
/// `-hood`, `-ly`.
fn after_our(rest: &str) -> bool {
    rest.is_empty()
        || rest == "s"
        || rest.starts_with(['a', 'e', 'i', 'o', 'u', 'y'])
        || ["ful", "less", "hood", "ly"]
            .iter()
            .any(|s| rest.starts_with(s))
}

/// Whether one word is the other with an inflection added (`plant`/`plants`, `tax`/`taxed`):
/// a choice the typist made, not an error.
fn inflection(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() < b.len() { (a, b) } else { (b, a) };
    long.strip_prefix(short).is_some_and(|rest| {
        matches!(
            rest,
            "s" | "es" | "d" | "ed" | "r" | "er" | "ly" | "y" | "e" | "ae"
        )
    }) || (a.len() == b.len() && {
        // taxes/taxed, analyzer/analyzed: the same stem with another ending after its `e`;
        // elsewhere the last letter is a key struck beside another (`worls` is no `world`).
        let (sa, sb) = (
            a.trim_end_matches(['s', 'd', 'r']),
            b.trim_end_matches(['s', 'd', 'r']),
        );
        sa == sb && sa.len() + 1 >= a.len() && sa.ends_with('e')
    })
}

/// Whether the typed function word and the function word `meant` are forms of one word, which
/// a writer picks rather than slips into (`your`/`you`, `hers`/`her`, `they`/`the` typed for
/// each other are choices the pairs cannot tell from slips); `-y` makes no function word of
/// another (`the` for `they`).
fn forms_of_one_function_word(typed: &str, meant: &str) -> bool {
    inflected_form(typed, meant) && !(meant.len() > typed.len() && meant.ends_with('y'))
}

/// Whether `typed` is `meant` with the article run into it: where `typed` is a known word and
/// `meant` a function word (`awhile`/`while`, `abut`/`but`), a word English made of the two,
/// not a slip of it. A content word so read stays a reading (`become areal estate agent`:
/// `real` is nearer the meant `a real` than `areal`).
fn article_run_in(typed: &str, meant: &str) -> bool {
    typed.strip_prefix('a') == Some(meant)
}

/// Whether one known word is the adjective in `-al` of the other, a noun in `-a`
/// (`vaginal`/`vagina`): a choice of word, not a slip.
fn adjective_in_al(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() < b.len() { (a, b) } else { (b, a) };
    short.ends_with('a') && long.strip_prefix(short) == Some("l")
}

/// Whether an unknown `typed` word and `meant` differ by an inflection (`chatbots`/`chatbot`,
/// `symptom`/`symptoms`, `larvae`/`larva`): a form the lists lack, left as typed. Only an ending
/// English grammar would put there counts; a letter doubled or added at the end is a slip
/// (`passs`, `typess`, `freee`, `cloude`, `lastr`: no word takes `-s` after `s`, nor `-e`, `-r`
/// or `-d` but after `a` or `e`), a final `e` lost is no form of anything (`peopl`, `activ`,
/// `suicid`), and a function word has no other ending (`doed` is no form of `does`).
fn inflected_form(typed: &str, meant: &str) -> bool {
    if !inflection(typed, meant) {
        return false;
    }
    let (stem, ending) = match (typed.strip_prefix(meant), meant.strip_prefix(typed)) {
        (Some(rest), _) => (meant, rest),
        (_, Some(rest)) => (typed, rest),
        // The same length: `taxes`/`taxed`.
        _ => return !is_stopword(meant),
    };
    match ending {
        "s" => !stem.ends_with(['s', 'x', 'z']),
        "e" => stem.ends_with('a'),
        "r" | "d" => stem.ends_with('e'),
        "y" => !stem.ends_with('y'),
        _ => true,
    }
}

/// `q` when it is a known content word, which gives context (stopwords go with everything).
fn context_word(q: Option<&QueryWord>) -> Option<&QueryWord> {
    q.filter(|q| q.stats.known() && q.lower.len() >= MIN_CONTEXT_CHARS && !is_stopword(&q.lower))
}

/// What the documents the query as typed retrieved say of its words
/// ([`RetrievedWords`]); says nothing when the caller did not search first.
struct Vote<'a> {
    r: &'a Repairer,
    retrieved: Option<&'a RetrievedWords>,
    /// Per word of the query: whether the documents are about the rest of it (see
    /// [`Vote::new`]).
    on_topic: Vec<bool>,
}

impl<'a> Vote<'a> {
    /// The vote on `words`: a word's vote counts only where the documents use the query's
    /// other content words (at least [`Params::vote_on_topic`] of them, and one) and the corpus
    /// writes each of them that a list knows ([`Params::vote_needs_corpus_words`]): documents
    /// that are not about the query say nothing by lacking a word.
    fn new(r: &'a Repairer, words: &[QueryWord], retrieved: Option<&'a RetrievedWords>) -> Self {
        let on_topic = match retrieved {
            None => Vec::new(),
            Some(d) => {
                let used: Vec<Option<bool>> = words
                    .iter()
                    .map(|w| w.content.then(|| d.documents_using(&w.lower) > 0))
                    .collect();
                let (all, hit) = used
                    .iter()
                    .flatten()
                    .fold((0u32, 0u32), |(a, h), &u| (a + 1, h + u32::from(u)));
                // Content words the lists know and the corpus never writes.
                let unwritten = |w: &QueryWord| {
                    r.params.vote_needs_corpus_words
                        && w.content
                        && w.stats.general > 0
                        && w.stats.corpus == 0
                };
                let gaps = words.iter().filter(|w| unwritten(w)).count();
                used.iter()
                    .zip(words)
                    .map(|(u, w)| {
                        let (others, used) = match u {
                            Some(u) => (all - 1, hit - u32::from(*u)),
                            None => (all, hit),
                        };
                        gaps == usize::from(unwritten(w))
                            && used >= 1
                            && f64::from(used) >= r.params.vote_on_topic * f64::from(others)
                    })
                    .collect()
            }
        };
        Vote {
            r,
            retrieved,
            on_topic,
        }
    }

    /// Whether any voting document uses `word`.
    fn uses(&self, word: &str) -> bool {
        self.retrieved.is_some_and(|d| d.documents_using(word) > 0)
    }

    /// `nats` when the documents are about the rest of the query (`words[at]` being `typed`),
    /// none of them uses `typed` (or it is the corpus's own rare typo that
    /// [`Params::vote_lift`] times as many of them outvote: [`Vote::outvotes`]) and enough use
    /// `meant` (seen `meant_count` times in the corpus): [`Params::vote_min_documents`], and
    /// [`Params::vote_lift`] times as many as a word that common would be in by chance (`one`,
    /// `active`, `never` are in most documents about anything), else 0.
    fn for_change(&self, at: usize, typed: &str, meant: &str, meant_count: u64, nats: f64) -> f64 {
        let p = &self.r.params;
        let Some(d) = self
            .retrieved
            .filter(|_| self.on_topic.get(at) == Some(&true))
        else {
            return 0.0;
        };
        let using = d.documents_using(meant);
        let share = meant_count as f64 / self.r.vocab().info().tokens.max(1) as f64;
        if self.outvotes(d, typed, using)
            && using >= p.vote_min_documents
            && f64::from(using) >= p.vote_lift * d.expected_using(share)
        {
            nats
        } else {
            0.0
        }
    }

    /// Whether documents `using` a candidate outvote `typed`: none of them uses it, or it is a
    /// string only the corpus knows, written there [`Params::vote_corpus_typo_count`] times or
    /// fewer and by nobody else (the usage list lacks it), and [`Params::vote_lift`] times as
    /// many use the candidate. A corpus has typos of its own (`elvic` in a passage on pelvic
    /// pain, `leasant`), and the query's slip may be one of them.
    fn outvotes(&self, d: &RetrievedWords, typed: &str, using: u32) -> bool {
        let p = &self.r.params;
        let typed_using = d.documents_using(typed);
        typed_using == 0 || {
            let stats = self.r.lm.stats(typed);
            stats.general == 0
                && (1..=p.vote_corpus_typo_count).contains(&stats.corpus)
                && self.r.lm.usage(typed).is_none()
                && f64::from(using) >= p.vote_lift * f64::from(typed_using)
        }
    }

    /// What the vote gives a real-word candidate: [`Params::real_word_vote`], or
    /// [`Params::real_word_vote_most`] where most of the voting documents use it: two
    /// documents of ten may share a word by topic alone (`lose belly fat` → `loss`), but where
    /// most documents about the query write the candidate and none the typed word, they agree
    /// on the reading (`the leather in jamaica` → `weather`).
    fn for_real_word(&self, at: usize, typed: &str, meant: &str, meant_count: u64) -> f64 {
        let p = &self.r.params;
        if self.agrees_on(at, typed, meant, meant_count) {
            p.real_word_vote.max(p.real_word_vote_most)
        } else {
            self.for_change(at, typed, meant, meant_count, p.real_word_vote)
        }
    }

    /// Whether the vote holds for `meant` ([`Vote::for_change`]) and at least half of the
    /// voting documents use it: they agree on the reading.
    fn agrees_on(&self, at: usize, typed: &str, meant: &str, meant_count: u64) -> bool {
        self.retrieved.is_some_and(|d| {
            2 * u64::from(d.documents_using(meant)) >= u64::from(d.documents())
                && self.for_change(at, typed, meant, meant_count, 1.0) > 0.0
        })
    }
}

/// A typed word's pairs with the words before and after it that general English's list holds:
/// each pair's count and what reading it as never seen changes (ln P, below zero).
type TypedPairs = (Option<(u64, f64)>, Option<(u64, f64)>);

/// Known words one edit from `words[at]` that the words beside it are known to go with, or that
/// the documents the query retrieved use instead of it ([`Params::real_word_vote`]).
fn real_words(
    r: &Repairer,
    words: &[QueryWord],
    at: usize,
    vote: &Vote<'_>,
    lookups: &mut Lookups,
) -> Vec<Reading> {
    let p = &r.params;
    let w = &words[at];
    // The documents about the query use the word as typed.
    if vote.uses(&w.lower) {
        return Vec::new();
    }
    let prev = at.checked_sub(1).map(|j| &words[j]);
    let next = words.get(at + 1);
    // A neighbour past punctuation is in another phrase (`improvement (lean six sigma)`).
    let prev = context_word(prev.filter(|_| w.spaced_from_previous));
    let next = context_word(next.filter(|q| q.spaced_from_previous));
    let adjacent = prev.is_some() || next.is_some();
    // At the start of a query the word's own probability speaks for it, as the word before it
    // would elsewhere (`untied states`: `united` is a thousand times as common), when a
    // neighbour speaks too.
    let at_start = p.real_word_at_start && at == 0 && adjacent;
    // A function word beside it speaks by association alone (see `association`).
    let function_word = |j: Option<usize>, spaced: bool| {
        j.map(|j| &words[j]).filter(|q| {
            p.function_word_context.is_some()
                && spaced
                && w.stats.general > 0
                && q.stats.known()
                && is_stopword(&q.lower)
        })
    };
    let fprev = function_word(at.checked_sub(1), w.spaced_from_previous);
    let fnext = function_word(
        (at + 1 < words.len()).then_some(at + 1),
        words.get(at + 1).is_some_and(|q| q.spaced_from_previous),
    );
    let typed_association = association(r, fprev, fnext, &w.stats, true);
    if !adjacent && vote.retrieved.is_none() {
        // Nothing else speaks: unless the function words could speak enough for some word,
        // no candidate is looked up.
        let most = |q: Option<&QueryWord>, after: bool| {
            q.map_or(Some(0.0), |q| r.lm.most_associated(&q.stats, after))
        };
        let reach = most(fprev, true)
            .zip(most(fnext, false))
            .map(|(a, b)| a + b);
        if fprev.is_none() && fnext.is_none()
            || reach.is_some_and(|reach| reach - typed_association <= p.real_word_cost)
        {
            return Vec::new();
        }
    }
    // The corpus's documents speak where they use the typed word near none of the query's
    // other content words, at least two of those are words they use, and a list knows every
    // one of them: a typo elsewhere hides what the query is about (`folly island sc macrh
    // temperatures` is no `fully island`). Where the index votes, a word with no content word
    // beside it is looked at whatever the function words say: the corpus speaks for it only
    // where the documents the query retrieved are about the rest of the query ([`Vote::new`]),
    // as the vote itself would (`how to get red of ants` is no `anti`: documents near `get`
    // and `red` write it).
    let passages = p.real_word_passage_gain.filter(|_| {
        if !adjacent && vote.retrieved.is_some() && vote.on_topic.get(at) != Some(&true) {
            return false;
        }
        let others = words
            .iter()
            .enumerate()
            .filter(|&(j, q)| j != at && q.content);
        others.clone().all(|(_, q)| q.stats.known())
            && others.filter(|(_, q)| q.stats.corpus > 0).count() >= p.real_word_passage_words
            && r.near_in_corpus(&w.lower, w.stats.corpus, words, Some(at), false)
                .0
                == 0
    });
    let found = lookups.get(r, &w.lower, 1);
    let start = at_start.then(|| question_start_lift(r, words));
    let context_score = |word: &str, s: &WordStats| with_neighbours(r, prev, next, start, word, s);
    let (with_typed, with_typed_floored) = context_score(&w.lower, &w.stats);
    // The typed word's pairs with its neighbours that the general list holds, each with what
    // reading it as never seen changes: most pairs are not in the list, and then nothing more is
    // looked up per candidate.
    let typed_pair = |a: (&str, &WordStats), b: (&str, &WordStats)| {
        let count = r.lm.general_pair_count(a.1, b.1);
        (count > 0).then(|| {
            let seen = r.lm.ln_bigram_raw_and_floored(a.0, a.1, b.0, b.1).0;
            (count, r.lm.ln_unseen_raw(b.1) - seen)
        })
    };
    let typed_pairs = (
        prev.and_then(|q| typed_pair((&q.lower, &q.stats), (&w.lower, &w.stats))),
        next.and_then(|q| typed_pair((&w.lower, &w.stats), (&q.lower, &q.stats))),
    );
    // The same for the function words beside it, which go with every word the more the more
    // common it is: a pair with one counts as typos where it is written e^typo_pair_margin
    // less than the pair with the meant word over what the two words' own counts give
    // (`affects of`, 15M, against `effects of`, 1,249M, where `effects` is 10 times as
    // common). The decoder weighs those pairs itself, so what reading such a
    // pair as never seen changes goes into the reading's cost.
    let function_pairs = (
        fprev.and_then(|q| typed_pair((&q.lower, &q.stats), (&w.lower, &w.stats))),
        fnext.and_then(|q| typed_pair((&w.lower, &w.stats), (&q.lower, &q.stats))),
    );
    let mut v: Vec<(f64, Reading)> = Vec::new();
    for &(id, d) in found.iter() {
        let meant = r.candidates.word(id);
        if is_stopword(meant)
            || meant.len() < MIN_CONTEXT_CHARS
            || inflection(&w.lower, meant)
            || adjective_in_al(&w.lower, meant)
        {
            continue;
        }
        let stats = r.candidate_stats[id as usize];
        // The gain the neighbours give, from the counts as they are (the decoder's floor on rare
        // words would hide it); the reading's cost makes up the difference, so the decoder
        // weighs the two words as the counts do.
        let (with_meant, with_meant_floored) = context_score(meant, &stats);
        // A typed pair written far less than the same pair with the meant word is mostly that
        // pair's typos (`side affects`, 21M, for `side effects`, 633M): it speaks for the typed
        // word no more than a pair never seen.
        let typo_pairs = |pairs: TypedPairs,
                          before: Option<&QueryWord>,
                          after: Option<&QueryWord>,
                          by_chance: f64| {
            [
                (pairs.0, before.map(|q| (&q.stats, &stats))),
                (pairs.1, after.map(|q| (&stats, &q.stats))),
            ]
            .into_iter()
            .filter_map(|(typed, meant)| {
                let ((count, change), (a, b)) = typed.zip(meant)?;
                let written = r.lm.general_pair_count(a, b) as f64;
                (written > count as f64 * by_chance * p.typo_pair_margin.exp()).then_some(-change)
            })
            .sum::<f64>()
        };
        let with_typed = with_typed - typo_pairs(typed_pairs, prev, next, 1.0);
        // A function word's pair is weak evidence alone (`a hood` is written 480 times less
        // than `a good`, `you wash` than `you wish`): it counts where a content word beside
        // it speaks for the meant word already, in general English's pairs and by the same
        // margin (`side effects`).
        let commoner = (stats.general as f64 / w.stats.general.max(1) as f64).max(1.0);
        let content_pair = prev.is_some_and(|q| r.lm.general_pair_known(&q.stats, &stats))
            || next.is_some_and(|q| r.lm.general_pair_known(&stats, &q.stats));
        let function_typos = if content_pair && with_meant - with_typed > p.typo_pair_margin {
            typo_pairs(function_pairs, fprev, fnext, commoner)
        } else {
            0.0
        };
        // Near every content word of the query chance would not bring near it (the others say
        // nothing), and at least two: a corpus that writes it near only some of them is about
        // something else (`folly island sc march temperatures` is no `fully island`).
        // A word the corpus lacks is near none (but by the filter's false positives).
        let passage_gain = passages.filter(|_| {
            stats.corpus > 0 && {
                let (near, asked) = r.near_in_corpus(meant, stats.corpus, words, Some(at), true);
                near == asked && near >= p.real_word_passage_words
            }
        });
        let gain = with_meant - with_typed
            + function_typos
            + vote.for_real_word(at, &w.lower, meant, stats.corpus)
            + passage_gain.unwrap_or(0.0);
        let floored = with_meant_floored - with_typed_floored;
        // The function words beside it open the gate but leave the reading's cost alone: the
        // decoder weighs their pairs itself.
        let associated = association(r, fprev, fnext, &stats, false) - typed_association;
        let change_cost = match p.real_word_swap_cost {
            Some(swap) if swapped_after_first(w.lower.as_bytes(), meant.as_bytes()) => swap,
            _ => p.real_word_cost,
        };
        if gain + associated <= change_cost {
            continue;
        }
        let prior =
            f64::from(error_model::cost(w.lower.as_bytes(), meant.as_bytes())) + change_cost;
        v.push(real_word_reading(meant, stats, prior, gain, floored, d));
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.into_iter().take(p.max_candidates).map(|x| x.1).collect()
}

/// Readings of a string that puts the regular past ending on an irregular verb as the verb's
/// own forms (`teached` → `taught`, `eated` → `ate` or `eaten`: the neighbours choose), or the
/// regular plural ending on a noun with an old plural as that plural (`tooths` → `teeth`), at
/// [`super::Params::over_regularised_cost`] plus `extra`, where the error model would price
/// letters no edit reaches, less the gap to the unknown word's prior. Only forms the lists
/// know, and only where the usage list holds the form far more than the string: `creeped` is
/// written as well as `crept`, a word of its own. Such a string reads as a typo (its keeping
/// pays for its neighbours, see [`typo_keep_cost`]).
fn over_regularised<'a>(
    r: &'a Repairer,
    typed: &'a str,
    extra: f64,
) -> impl Iterator<Item = Reading> + 'a {
    let p = &r.params;
    let cost = p.over_regularised_cost.unwrap_or(f64::INFINITY);
    let ln_typed = r.ln_usage(typed).unwrap_or(-(1e9f64).ln());
    r.over_regularised(typed)
        .iter()
        .filter(move |_| cost.is_finite())
        .filter_map(move |meant| {
            let stats = r.lm.stats(meant);
            let written_far_more = r
                .ln_usage(meant)
                .is_some_and(|ln_meant| ln_meant - cost - ln_typed > p.typo_usage_margin);
            // The form is what was meant, and no less likely than the string: lifted to the
            // unknown word's prior where it sits below (`slept`, `ate` at the model's floor).
            let floor_gap = (p.ln_unknown_word - r.lm.ln_unigram(&stats)).max(0.0);
            (stats.known() && written_far_more).then(|| Reading {
                span: 1,
                words: smallvec![(meant.as_ref().into(), stats)],
                cost: cost + extra - floor_gap,
                kind: Some(EditKind::NonWord),
                distance: error_model::distance(typed.as_bytes(), meant.as_bytes(), u8::MAX - 1),
            })
        })
}

/// Real-word readings of a known content word as a word that sounds the same (`who rote` →
/// `who wrote`, `back pane` → `back pain`): people write a word they know by its sound, so a
/// homophone costs [`super::Params::homophone_cost`] where the error model would price the
/// letters (`pane` → `pain` is two edits). The neighbours decide, as for other real-word
/// readings, but function words count (`who wrote` is written 81M times, `who rote` never):
/// the pair lists know them best. No function word is read (`you` for `hugh`), nor a word
/// inside a token or before `'s` (`lowe's`: a name).
fn homophones_in_context(
    r: &Repairer,
    words: &[QueryWord],
    at: usize,
    vote: &Vote<'_>,
) -> Vec<Reading> {
    let p = &r.params;
    let w = &words[at];
    let Some(sound_cost) = p.homophone_cost else {
        return Vec::new();
    };
    let sounds = r.homophones(&w.lower);
    let next = words.get(at + 1);
    if sounds.is_empty()
        || !w.whole_token
        || next.is_some_and(|q| !q.spaced_from_previous)
        || vote.uses(&w.lower)
    {
        return Vec::new();
    }
    let neighbour = |q: &&QueryWord| q.stats.known() && q.editable;
    let prev = at
        .checked_sub(1)
        .map(|j| &words[j])
        .filter(|q| w.spaced_from_previous && neighbour(q));
    let next = next.filter(|q| q.spaced_from_previous && neighbour(q));
    if prev.is_none() && next.is_none() {
        return Vec::new();
    }
    let start = (p.real_word_at_start && at == 0).then(|| question_start_lift(r, words));
    let (with_typed, with_typed_floored) =
        with_neighbours(r, prev, next, start, &w.lower, &w.stats);
    let mut v: Vec<(f64, Reading)> = sounds
        .iter()
        .filter(|meant| !is_stopword(meant))
        .filter_map(|meant| {
            let stats = r.lm.stats(meant);
            if stats.general == 0 {
                return None;
            }
            let (with_meant, with_meant_floored) =
                with_neighbours(r, prev, next, start, meant, &stats);
            let gain =
                with_meant - with_typed + vote.for_real_word(at, &w.lower, meant, stats.corpus);
            (gain > p.real_word_cost).then(|| {
                let floored = with_meant_floored - with_typed_floored;
                real_word_reading(
                    meant,
                    stats,
                    sound_cost + p.real_word_cost,
                    gain,
                    floored,
                    1,
                )
            })
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.into_iter().take(p.max_candidates).map(|x| x.1).collect()
}

/// ln P of `word` with the words beside it, from the counts as they are and floored (one look-up
/// of each pair serves both); with no word before it, its own probability when `start` is the
/// query's [`question_start_lift`] (the start of a query, where it speaks as the word before
/// would elsewhere, a question word lifted), else nothing.
fn with_neighbours(
    r: &Repairer,
    prev: Option<&QueryWord>,
    next: Option<&QueryWord>,
    start: Option<f64>,
    word: &str,
    s: &WordStats,
) -> (f64, f64) {
    let before = match prev {
        Some(q) => r.lm.ln_bigram_raw_and_floored(&q.lower, &q.stats, word, s),
        None => match start {
            Some(question_start) => {
                let (raw, floored) = r.lm.ln_unigram_raw_and_floored(s);
                let lift = start_lift(word, question_start);
                (raw + lift, floored + lift)
            }
            None => (0.0, 0.0),
        },
    };
    let after = next.map_or((0.0, 0.0), |q| {
        r.lm.ln_bigram_raw_and_floored(word, s, &q.lower, &q.stats)
    });
    (before.0 + after.0, before.1 + after.1)
}

/// ln of how much more a word goes with the function words beside it than by chance in
/// general English: each pair's probability over the second word's own (see
/// [`super::Params::function_word_context`]). The typed word has the benefit of the doubt
/// (`typed`): a pair the list lacks may be written up to the list's least count, but is taken
/// as associated at most [`super::Params::function_word_context`] nats. Nothing where the word
/// list lacks the word.
fn association(
    r: &Repairer,
    prev: Option<&QueryWord>,
    next: Option<&QueryWord>,
    s: &WordStats,
    typed: bool,
) -> f64 {
    let doubt = r.params.function_word_context.unwrap_or(0.0);
    let pmi = |a: &WordStats, b: &WordStats| {
        let seen = r.lm.ln_general_association(a, b, false).unwrap_or(0.0);
        if !typed || r.lm.general_pair_count(a, b) > 0 {
            return seen;
        }
        let most = r.lm.ln_general_association(a, b, true).unwrap_or(0.0);
        most.min(doubt).max(seen)
    };
    prev.map_or(0.0, |q| pmi(&q.stats, s)) + next.map_or(0.0, |q| pmi(s, &q.stats))
}

/// A real-word reading of `meant`, whose neighbours make it `gain` nats likelier than the typed
/// word (`floored` as the decoder's floor on rare words sees it), at `prior` nats before that
/// gain; with its rank among the word's readings. The reading's cost makes up the difference
/// the floor hides, so the decoder weighs the two words as the counts do.
fn real_word_reading(
    meant: &str,
    stats: WordStats,
    prior: f64,
    gain: f64,
    floored: f64,
    distance: u8,
) -> (f64, Reading) {
    let cost = prior - (gain - floored);
    (
        cost - gain,
        Reading {
            span: 1,
            words: smallvec![(meant.into(), stats)],
            cost,
            kind: Some(EditKind::RealWord),
            distance,
        },
    )
}

/// Whether general English's pair list writes `meant` after `prev` more than any other
/// two-letter function word (`what is`, 2,175M, over `what it`, 1,075M).
fn commonest_two_letters_after(r: &Repairer, prev: Option<&QueryWord>, meant: &WordStats) -> bool {
    let Some(q) = prev else { return false };
    let count = r.lm.general_pair_count(&q.stats, meant);
    count > 0
        && STOPWORDS
            .iter()
            .filter(|m| m.len() == 2)
            .all(|m| r.lm.general_pair_count(&q.stats, &r.lm.stats(m)) <= count)
}

/// By how much (in nats) a neighbour's pair with the word a typed function word is confused
/// with must be written more often than the same pair as typed for that word to be read in its
/// place (the next word's pair for a function word that sounds the same, either neighbour's for
/// one a letter apart or a content word that sounds the same; [`Confusion`]): `there is` 520
/// times `their is`, `there own` 170 times `their own`, while `in their` is written only 11
/// times as often as `in there`, which is English too.
const CONFUSED_PAIR_MARGIN: f64 = 4.0;

/// How a function word may be read for the typed one ([`function_word_in_context`]).
#[derive(Clone, Copy)]
enum Confusion {
    /// One slip of the hand away.
    Slip,
    /// One letter for another after the first, a content word of four letters or more typed
    /// for a function word as long (`how mann calories` → `many`, `how lond should` → `long`):
    /// not a slip of the hand, so it pays [`super::Params::function_word_letter_cost`] more.
    Letter,
    /// Sounds the same.
    Sound,
    /// One letter more, less or for another after the first, both of four letters or more
    /// (`where`/`were`, `then`/`than`, `these`/`those`).
    OneLetter,
    /// A content word that sounds the same (`how to no if` → `know`, `for wheel drive` →
    /// `four`), of a typed function word of two letters or more.
    ContentSound,
}

/// The function words of four letters or more that are one letter apart after the first —
/// one more or less, or one for another ([`Confusion::OneLetter`]) — found once.
fn one_letter_apart() -> &'static [(&'static str, &'static str)] {
    static PAIRS: std::sync::OnceLock<Vec<(&str, &str)>> = std::sync::OnceLock::new();
    PAIRS.get_or_init(|| {
        let long = || STOPWORDS.iter().copied().filter(|w| w.len() >= 4);
        long()
            .flat_map(|a| long().map(move |b| (a, b)))
            .filter(|(a, b)| {
                let (a, b) = (a.as_bytes(), b.as_bytes());
                one_letter_more(a, b) || (a != b && one_letter_for_another(a, b))
            })
            .collect()
    })
}

/// Whether `typed` is `meant` with one letter for another after the first, both of four letters
/// or more ([`Confusion::Letter`]).
fn one_letter_for_another(typed: &[u8], meant: &[u8]) -> bool {
    typed.len() >= 4
        && typed.len() == meant.len()
        && typed.first() == meant.first()
        && typed.iter().zip(meant).filter(|(a, b)| a != b).count() == 1
}

/// The function words ([`STOPWORDS`]) within one edit of `typed` (a letter for another, one
/// left out or added, two swapped), in the list's order, and perhaps a few more. Two words one
/// edit apart are equal once at most one letter is deleted from each: the function words are
/// filed under each such string of theirs, once, so the slips of a query's function words
/// cost a few look-ups instead of a test of every function word.
fn function_words_one_edit_from(typed: &[u8]) -> Vec<&'static str> {
    type Filed = std::collections::HashMap<Vec<u8>, Vec<u16>, foldhash::fast::FixedState>;
    static FILED: std::sync::OnceLock<Filed> = std::sync::OnceLock::new();
    let filed = FILED.get_or_init(|| {
        let mut filed = Filed::default();
        for (i, w) in STOPWORDS.iter().enumerate() {
            for_each_one_letter_delete(w.as_bytes(), |s| {
                let ids = filed.entry(s.to_vec()).or_default();
                if ids.last() != Some(&(i as u16)) {
                    ids.push(i as u16);
                }
            });
        }
        filed
    });
    let mut ids: Vec<u16> = Vec::new();
    for_each_one_letter_delete(typed, |s| {
        ids.extend(filed.get(s).into_iter().flatten());
    });
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter().map(|i| STOPWORDS[usize::from(i)]).collect()
}

/// Calls `f` with `word` and with each string made by deleting one of its letters.
fn for_each_one_letter_delete(word: &[u8], mut f: impl FnMut(&[u8])) {
    f(word);
    let mut shorter = Vec::with_capacity(word.len());
    for i in 0..word.len() {
        shorter.clear();
        shorter.extend_from_slice(&word[..i]);
        shorter.extend_from_slice(&word[i + 1..]);
        f(&shorter);
    }
}

/// Whether `longer` is `shorter` with one letter added after the first.
fn one_letter_more(shorter: &[u8], longer: &[u8]) -> bool {
    longer.len() == shorter.len() + 1
        && (1..longer.len()).any(|i| longer[..i] == shorter[..i] && longer[i + 1..] == shorter[i..])
}

/// The shortest and the longest typed word read as a slip of a function word in context: two
/// letters are mostly acronyms (`tv`, `va`, `oz` are no `to`, `a`, `of`), and so are three
/// that make a two-letter function word with one left out (`seo`, `tpo`, `ion` are no `so`,
/// `to`, `in`), which is why the function word has three letters too.
const FUNCTION_SLIP_LETTERS: std::ops::RangeInclusive<usize> = 3..=6;

/// Function words a known word `words[at]` is one slip of the hand from (two letters swapped, a
/// key next to the right one, a letter left out or added beside its neighbour: how a word the
/// writer knows is mistyped, [`error_model::slip_of_the_hand`]) and that the words beside it —
/// function words too, which are the evidence here — are written with far more than with the
/// word as typed: `how long dose it take` → `does`, `cheap flights fro dallas` → `from`.
/// A content word of four letters or more with one letter for another after the first
/// (`how mann calories` → `many`, [`Confusion::Letter`]) is read under the same tests, at
/// [`super::Params::function_word_letter_cost`] more.
///
/// The general pair list keeps every pair written 6.4M times or more, so a neighbour it holds
/// with the function word and never with the typed word speaks loudly; a pair it holds with
/// the typed word too (within [`super::Params::typo_pair_margin`]) rules the reading out. The
/// neighbours' gain must pass [`super::Params::function_word_cost`] plus the slip's own cost
/// ([`super::Params::function_word_start_cost`] for a query's first word, plus
/// [`super::Params::corpus_word_cost`] for a word only the corpus knows); for a three-letter
/// word no list holds (`what is rhe best`), which the caller passes too,
/// [`super::Params::unknown_function_word_cost`].
///
/// A function word is also read for a function word that sounds the same (`their is a mouse`
/// → `there is`, `how too cook rice` → `how to`) at [`super::Params::homophone_cost`], where the
/// next word's pair says so, and for one a letter apart (`who where the` → `who were`) at the
/// letter's cost, where either neighbour's does (see [`CONFUSED_PAIR_MARGIN`] and
/// [`Confusion`]); and, whatever its length, for a content word that sounds the same (`how to
/// no if` → `know`, `for wheel drive` → `four`, `can you here me` → `hear`) at
/// [`super::Params::homophone_cost`], where either neighbour's pair says so and neither says
/// the opposite. Slips are read for words of [`FUNCTION_SLIP_LETTERS`] only, and two letters
/// swapped for a string the word list lacks ([`super::Params::swapped_function_word_cost`]).
fn function_word_in_context(r: &Repairer, words: &[QueryWord], at: usize) -> Vec<Reading> {
    let p = &r.params;
    let w = &words[at];
    let neighbour = |q: &&QueryWord| q.stats.known() && q.editable;
    // The words beside it in the same phrase, known or not.
    let beside = (
        at.checked_sub(1)
            .map(|j| &words[j])
            .filter(|_| w.spaced_from_previous),
        words.get(at + 1).filter(|q| q.spaced_from_previous),
    );
    let prev = beside.0.filter(neighbour);
    let next = beside.1.filter(neighbour);
    if prev.is_none() && next.is_none() || answers_a_comparative(r, words, at) {
        return Vec::new();
    }
    let typed = w.lower.as_bytes();
    let start = (at == 0).then(|| question_start_lift(r, words));
    let context_score = |word: &str, s: &WordStats| with_neighbours(r, prev, next, start, word, s);
    let pair_counts = |s: &WordStats| {
        [
            prev.map(|q| r.lm.general_pair_count(&q.stats, s)),
            next.map(|q| r.lm.general_pair_count(s, &q.stats)),
        ]
    };
    let typed_pairs = pair_counts(&w.stats);
    // Function words a writer who knows both mixes up, written for each other so often that
    // the typed word's pairs are written too (`their is`: 13.6M times in the pair list): those
    // that sound the same and start with the same letter (`their` and `there`, `too` and `to`;
    // not `are` and `or`, which only share a weak form), and those of four letters or more one
    // letter apart after the first (`where` and `were`, `then` and `than`); and content words
    // that sound as they do (`no` and `know`, `for` and `four`). Only with homophones on.
    let typed_is_function_word = is_stopword(&w.lower);
    let confusable = p.homophone_cost.is_some() && w.whole_token && typed_is_function_word;
    let heard: &[Box<str>] = if confusable {
        r.homophones(&w.lower)
    } else {
        &[]
    };
    let sounds: Vec<&str> = if next.is_some() {
        heard
            .iter()
            .map(|m| &**m)
            .filter(|m| is_stopword(m) && m.as_bytes().first() == typed.first())
            .collect()
    } else {
        Vec::new()
    };
    let one_letter: Vec<&str> = if confusable && typed.len() >= 4 {
        one_letter_apart()
            .iter()
            .filter_map(|&(a, b)| match w.lower.as_str() {
                t if t == a => Some(b),
                t if t == b => Some(a),
                _ => None,
            })
            .collect()
    } else {
        Vec::new()
    };
    // A single letter (`t`, `s`) is an initial or a unit more often than a word misheard.
    let content_sounds: Vec<&str> = if typed.len() >= 2 {
        heard
            .iter()
            .map(|m| &**m)
            .filter(|m| !is_stopword(m))
            .collect()
    } else {
        Vec::new()
    };
    // Written beside every neighbour as it stands (`what is the`): no slip, unless the pairs
    // are the function word's typos (`wat is`, 13.7M, against `what is`, 2,175M; see below).
    let written_beside_all = typed_pairs.iter().flatten().all(|&c| c > 0);
    // Two letters the word list lacks, read as a function word swapped
    // ([`super::Params::swapped_function_word_cost`]), between two neighbours, one a content
    // word (`is ti a` may be an acronym between two function words, each of which goes with
    // `it`) or the first a question word that starts the query and makes a set phrase with
    // the function word (`what si a stent`; not `what os is`: `what so` is no set phrase).
    let after_question = at == 1 && prev.is_some_and(|q| QUESTION_WORDS.contains(&&*q.lower));
    let function_words_beside = prev
        .zip(next)
        .is_some_and(|(a, b)| is_stopword(&a.lower) && is_stopword(&b.lower));
    // After such a question the word after it may be one no list knows (`what si
    // hyperlipidemia`), which says nothing: then the question speaks alone, for the two-letter
    // word written after it most (`what is`, not `what it`: `what ti nspire` is a calculator).
    let question_alone = after_question && next.is_none() && beside.1.is_some();
    let swapped_two = typed.len() == 2
        && w.stats.general == 0
        && prev.is_some()
        && (next.is_some() || question_alone)
        && (!function_words_beside || after_question)
        && p.swapped_function_word_cost.is_some();
    // Whether a content word beside it, or the question before it, speaks for the function
    // word `s`.
    let question_phrase = |s: &WordStats| {
        !function_words_beside
            || prev
                .and_then(|q| r.lm.ln_general_association(&q.stats, s, false))
                .is_some_and(|x| x >= p.swapped_question_association)
    };
    let slip_lengths = FUNCTION_SLIP_LETTERS.contains(&typed.len()) || swapped_two;
    if written_beside_all
        && !slip_lengths
        && sounds.is_empty()
        && one_letter.is_empty()
        && content_sounds.is_empty()
    {
        return Vec::new();
    }
    // Scored once a reading passes its pair tests: most do not.
    let typed_score = std::cell::OnceCell::new();
    let typo_pairs_unseen = std::cell::OnceCell::new();
    let prior_cost = if swapped_two {
        p.swapped_function_word_cost.unwrap_or(f64::INFINITY)
    } else if !w.stats.known() {
        p.unknown_function_word_cost
    } else {
        // A query with another word no list knows may be in another language, whose own
        // words read as English slips (`wat is cappuccino koffie`, Dutch).
        let place = match at {
            0 if another_word_unknown(r, words, at) => p.function_word_start_foreign_cost,
            0 => p.function_word_start_cost,
            _ => p.function_word_cost,
        };
        let corpus_only = if w.stats.general == 0 {
            p.corpus_word_cost
        } else {
            0.0
        };
        place + corpus_only
    };
    let letter_for_letter = p.function_word_letter_cost.is_some() && !typed_is_function_word;
    // The function word makes a set phrase with a neighbour (`how long`, `how many`), which
    // speaks for it where a letter for another alone does not
    // ([`super::Params::function_word_phrase_association`]).
    let set_phrase = |s: &WordStats| {
        p.function_word_phrase_association.is_some_and(|least| {
            prev.and_then(|q| r.lm.ln_general_association(&q.stats, s, false))
                .into_iter()
                .chain(next.and_then(|q| r.lm.ln_general_association(s, &q.stats, false)))
                .any(|a| a >= least)
        })
    };
    // Both kinds of slip below are one edit: only the function words that near are asked.
    let near: Vec<&str> = if slip_lengths {
        function_words_one_edit_from(typed)
    } else {
        Vec::new()
    };
    let slips = near
        .into_iter()
        .filter(|m| {
            if swapped_two {
                m.len() == 2 && m.bytes().eq(typed.iter().rev().copied()) && *m != w.lower
            } else {
                m.len() >= 3 && m.len().abs_diff(typed.len()) <= 1
            }
        })
        // A word that is no function word has no function word among its forms, whatever
        // endings they seem to share: `man` is `many` with a letter left out, `doe` is `does`,
        // `wad` is `was` one key off (`how man calories`, `how long doe it take`).
        .filter(|m| !(typed_is_function_word && forms_of_one_function_word(&w.lower, m)))
        .filter(|m| !(w.stats.known() && article_run_in(&w.lower, m)))
        .filter_map(|m| {
            if error_model::slip_of_the_hand(typed, m.as_bytes()) {
                Some((m, Confusion::Slip))
            } else if letter_for_letter && one_letter_for_another(typed, m.as_bytes()) {
                Some((m, Confusion::Letter))
            } else {
                None
            }
        });
    let homophones = sounds.iter().map(|&m| (m, Confusion::Sound));
    let letters = one_letter.iter().map(|&m| (m, Confusion::OneLetter));
    let content = content_sounds.iter().map(|&m| (m, Confusion::ContentSound));
    let pair_margin = CONFUSED_PAIR_MARGIN.exp();
    let mut v: Vec<(f64, Reading)> = slips
        .chain(homophones)
        .chain(letters)
        .chain(content)
        .filter_map(|(meant, confusion)| {
            let stats = r.lm.stats(meant);
            if matches!(confusion, Confusion::ContentSound) && stats.general == 0 {
                // A name the CMU list spells as the word sounds (`noh`, `noe` for `no`).
                return None;
            }
            let meant_pairs = pair_counts(&stats);
            // (typed, meant) pair counts on each side with a neighbour.
            let sides = || {
                typed_pairs
                    .iter()
                    .zip(&meant_pairs)
                    .filter_map(|pair| match pair {
                        (Some(t), Some(m)) => Some((*t as f64, *m as f64)),
                        _ => None,
                    })
            };
            let favours = |(t, m): (f64, f64)| m > 0.0 && m > t * pair_margin;
            let letters = || f64::from(error_model::cost(typed, meant.as_bytes()));
            // What the reading costs before the neighbours' gain: the channel, and the prior
            // that stands for the evidence the pairs do not give.
            let (channel, prior_cost) = match confusion {
                // A slip: no pair written with the typed word nearly as often as with the
                // function word, and one written with the function word.
                Confusion::Slip | Confusion::Letter => {
                    let margin = p.typo_pair_margin.exp();
                    if sides().any(|(t, m)| t > 0.0 && t * margin >= m)
                        || !sides().any(|(_, m)| m > 0.0)
                        // Two letters: no neighbour's pair with the string is written, and
                        // every one with the function word.
                        || swapped_two
                            && !(sides().all(|(t, m)| t == 0.0 && m > 0.0)
                                && question_phrase(&stats)
                                && (!question_alone || commonest_two_letters_after(r, prev, &stats)))
                    {
                        return None;
                    }
                    let not_a_slip = match confusion {
                        Confusion::Letter if !set_phrase(&stats) => {
                            p.function_word_letter_cost.unwrap_or(0.0)
                        }
                        _ => 0.0,
                    };
                    (letters(), prior_cost + not_a_slip)
                }
                // A homophone decided by the next word (`there is`, 7,076M, 520 times `their
                // is`; [`CONFUSED_PAIR_MARGIN`]), with no pair written more as typed (`what is
                // their name` stays: `their name` is written, `there name` not): the pair test
                // is the evidence a slip's prior stands for, so the gain pays the sound alone.
                Confusion::Sound => {
                    let after = match (typed_pairs[1], meant_pairs[1]) {
                        (Some(t), Some(m)) => favours((t as f64, m as f64)),
                        _ => false,
                    };
                    if !after || sides().any(|(t, m)| t > 0.0 && t >= m) {
                        return None;
                    }
                    (p.homophone_cost.unwrap_or(0.0), 0.0)
                }
                // One letter apart, or a content word that sounds the same, decided by either
                // neighbour (`who were` is written, `who where` not; `know if`, never `no if`),
                // unless the other is written with the typed word far more (`where the` is 3.4
                // times `were the`: not far more; `no longer` keeps `i no longer`): the
                // letter's cost alone, or the sound's.
                Confusion::OneLetter | Confusion::ContentSound => {
                    let against = p.typo_pair_margin.exp();
                    // `then` right after a comparative is its `than` (`better then nothing`,
                    // `more then 10 years`): the comparative's set phrase speaks where the
                    // pairs' margin alone does not, and at the end of a phrase too.
                    let comparative = meant == "than" && then_after_comparative(r, prev, &stats);
                    if !comparative
                        && (!sides().any(favours)
                            || sides().any(|(t, m)| t > 0.0 && t >= m * against))
                    {
                        return None;
                    }
                    // A letter for another is read between two neighbours only: a phrase may
                    // end with the typed word where the other seldom ends one (`get out of
                    // there` is no `of these`, though `of these` is written far more).
                    if matches!(confusion, Confusion::OneLetter)
                        && meant.len() == typed.len()
                        && (prev.is_none() || next.is_none())
                        && !comparative
                    {
                        return None;
                    }
                    // A content word beside a function word read as a content word must speak
                    // for it too: silent, it may be what the function word joins (`kilometers
                    // to miles`, where no list pairs `kilometers`, is no `two miles`), and so
                    // may a word no list knows (`kilometrs to miles`).
                    let silent_content = [beside.0, beside.1].iter().enumerate().any(|(k, q)| {
                        q.is_some_and(|q| !is_stopword(&q.lower))
                            && !matches!(
                                (typed_pairs[k], meant_pairs[k]),
                                (Some(t), Some(m)) if favours((t as f64, m as f64))
                            )
                    });
                    if matches!(confusion, Confusion::ContentSound) && silent_content {
                        return None;
                    }
                    match confusion {
                        Confusion::OneLetter => (letters(), 0.0),
                        _ => (p.homophone_cost.unwrap_or(0.0), 0.0),
                    }
                }
            };
            let (with_meant, with_meant_floored) = context_score(meant, &stats);
            let (with_typed, with_typed_floored) =
                *typed_score.get_or_init(|| context_score(&w.lower, &w.stats));
            // A slip's typed pairs passed the test above: each is written e^typo_pair_margin
            // times less than with the function word, mostly as its typos, and speaks for the
            // typed word no more than a pair never seen (as in `real_words`).
            let typo_pairs = match confusion {
                // The comparative's pair with `then` is written e^typo_pair_margin times less
                // than with `than` (`better then`, 34M, against 1,026M): mostly its typos.
                Confusion::OneLetter if meant == "than" && then_after_comparative(r, prev, &stats) => {
                    prev.map_or(0.0, |q| {
                        let typed_count = r.lm.general_pair_count(&q.stats, &w.stats) as f64;
                        let meant_count = r.lm.general_pair_count(&q.stats, &stats) as f64;
                        if typed_count == 0.0
                            || meant_count < typed_count * p.typo_pair_margin.exp()
                        {
                            return 0.0;
                        }
                        r.lm.ln_unseen_raw(&w.stats)
                            - r.lm
                                .ln_bigram_raw_and_floored(&q.lower, &q.stats, &w.lower, &w.stats)
                                .0
                    })
                }
                Confusion::Slip | Confusion::Letter => *typo_pairs_unseen.get_or_init(|| {
                    let unseen = |a: (&str, &WordStats), b: (&str, &WordStats)| {
                        if r.lm.general_pair_count(a.1, b.1) == 0 {
                            return 0.0;
                        }
                        r.lm.ln_unseen_raw(b.1)
                            - r.lm.ln_bigram_raw_and_floored(a.0, a.1, b.0, b.1).0
                    };
                    prev.map_or(0.0, |q| unseen((&q.lower, &q.stats), (&w.lower, &w.stats)))
                        + next.map_or(0.0, |q| unseen((&w.lower, &w.stats), (&q.lower, &q.stats)))
                }),
                _ => 0.0,
            };
            let gain = with_meant - with_typed - typo_pairs;
            if gain <= prior_cost + channel {
                return None;
            }
            let floored = with_meant_floored - with_typed_floored;
            let prior = channel + prior_cost;
            let (rank, mut reading) = real_word_reading(meant, stats, prior, gain, floored, 1);
            if !w.stats.known() {
                reading.kind = Some(EditKind::NonWord);
            }
            Some((rank, reading))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.into_iter().take(p.max_candidates).map(|x| x.1).collect()
}

/// Whether the word before `then`, `prev`, is a comparative it stands for `than` after (`than`'s
/// stats): general English's pair list writes `than` after it
/// [`super::Params::comparative_association`] nats over chance or more (`better`, `more`,
/// `rather`). Nobody writes a comparative and `then` but for `than`, or across a pause a query
/// leaves out (`study more, then rest`: the comma ends the phrase, and no `prev` is passed).
fn then_after_comparative(r: &Repairer, prev: Option<&QueryWord>, than: &WordStats) -> bool {
    let Some(least) = r.params.comparative_association else {
        return false;
    };
    prev.is_some_and(|q| {
        !q.ends_phrase
            && r.lm
                .ln_general_over_chance(&q.stats, than)
                .is_some_and(|a| a >= least)
    })
}

/// Whether `words[at]` is `than` after a comparative it answers: a word before it that general
/// English's pair list writes before `than` [`super::Params::comparative_association`] nats
/// over chance or more (`better to live in a small town than in a big city`). Its neighbours
/// alone may want another word (`town that`), as they cannot see the comparative.
fn answers_a_comparative(r: &Repairer, words: &[QueryWord], at: usize) -> bool {
    let Some(least) = r.params.comparative_association else {
        return false;
    };
    let than = &words[at];
    than.lower == "than"
        && words[..at].iter().any(|q| {
            r.lm.ln_general_over_chance(&q.stats, &than.stats)
                .is_some_and(|a| a >= least)
        })
}

/// A state of the search: the last meant word at a word boundary.
struct State<'a> {
    /// Borrowed from the reading that ends here.
    word: &'a str,
    stats: WordStats,
    score: f64,
    /// (boundary, state there, reading index at that boundary's position).
    back: Option<(usize, usize, usize)>,
}

/// The language model's scores of one query's transitions, kept across the searches of that
/// query (the best path, then the best path with each edit forced back to the typed words): a
/// transition is the reading that ends at a boundary, (position, reading index), followed by
/// the reading that starts there.
#[derive(Default)]
pub(crate) struct Transitions {
    scores: std::collections::HashMap<(u32, u32, u32, u32), f64, foldhash::fast::FixedState>,
}

/// Whether a word of the query other than the one at `at` is editable and known to no list:
/// the sign that the query may be in another language. A word English writes as often as the
/// usage list's candidates are (`powershell`, `usaid`) is no such sign; one written as rarely
/// as another language's words are in English text is (`koffie`, `lunula`).
fn another_word_unknown(r: &Repairer, words: &[QueryWord], at: usize) -> bool {
    let least = r.params.usage_candidate_per_billion;
    words.iter().enumerate().any(|(j, q)| {
        j != at
            && q.editable
            && !q.stats.known()
            && (least == 0 || r.lm.usage(&q.lower).is_none_or(|u| u < least))
    })
}

/// Question words, which begin queries far more often than they come in running English.
const QUESTION_WORDS: [&str; 7] = ["what", "how", "when", "where", "why", "who", "which"];

/// [`super::Params::question_start_lift`] for a query: nothing where another of its words is
/// one no list knows, as such a query may be in another language, whose own words read as
/// English slips (`wat is cappuccino koffie`, Dutch; see
/// [`super::Params::function_word_start_foreign_cost`]).
pub(crate) fn question_start_lift(r: &Repairer, words: &[QueryWord]) -> f64 {
    if another_word_unknown(r, words, 0) {
        0.0
    } else {
        r.params.question_start_lift
    }
}

/// What `word` adds to its ln probability as a query's first word, given the query's
/// [`question_start_lift`].
fn start_lift(word: &str, question_start: f64) -> f64 {
    if QUESTION_WORDS.contains(&word) {
        question_start
    } else {
        0.0
    }
}

/// Words that ask about the word before them, which end queries far more often than they come
/// in running English (see [`super::Params::frame_word_lift`]).
const FRAME_END_WORDS: [&str; 5] = ["meaning", "definition", "define", "synonym", "synonyms"];

/// Words that ask about the words after them, which begin queries far more often than they come
/// in running English (`define X`, `definition of X`, `meaning of X`).
const FRAME_START_WORDS: [&str; 3] = ["define", "definition", "meaning"];

/// What `word` adds to its ln probability as the first (`last` false) or the last word of a
/// query of `words` words ([`super::Params::frame_word_lift`]); `mean` as the last word of one
/// that asks what something means ([`asks_what_it_means`]) too.
fn frame_lift(r: &Repairer, word: &str, last: bool, words: usize, asks_meaning: bool) -> f64 {
    let frame: &[&str] = if last {
        &FRAME_END_WORDS
    } else {
        &FRAME_START_WORDS
    };
    if words >= 2 && frame.contains(&word) || last && asks_meaning && word == "mean" {
        r.params.frame_word_lift
    } else {
        0.0
    }
}

/// Whether the query, as typed, opens with `what` and `does`, `do` or `did` and has a word
/// between them and its last (`what does creek mean`, MS MARCO's commonest frame after `what
/// is`): its last word is then `mean` far more often than running English ends a phrase with
/// it, as `meaning` ends `X meaning`.
fn asks_what_it_means(readings: &[Vec<Reading>]) -> bool {
    let typed = |i: usize| {
        readings
            .get(i)
            .and_then(|rs| rs.first())
            .filter(|rd| rd.kind.is_none() && rd.words.len() == 1)
            .map(|rd| rd.words[0].0.as_str())
    };
    readings.len() >= 4
        && typed(0) == Some("what")
        && matches!(typed(1), Some("does" | "do" | "did"))
}

/// Whether the query's first word as typed is a string nobody writes: a frame word read first
/// is then lifted over it ([`frame_lift`]), where one people write there is as often a first
/// name before a surname (`defne jones`).
fn frame_start(r: &Repairer, readings: &[Vec<Reading>]) -> bool {
    readings
        .first()
        .and_then(|rs| rs.first())
        .is_some_and(|rd| {
            rd.kind.is_none() && rd.words.len() == 1 && r.lm.usage(&rd.words[0].0).is_none()
        })
}

/// ln P of the inside of a reading (a split's words after its first, each after the one before).
fn ln_inside(r: &Repairer, rd: &Reading) -> f64 {
    rd.words
        .windows(2)
        .map(|pair| {
            r.lm.ln_bigram(&pair[0].0, &pair[0].1, &pair[1].0, &pair[1].1)
        })
        .sum()
}

/// ln P of a reading's first word as the query's first, with a question word's and a frame
/// word's lifts ([`best_path`]).
fn ln_start(
    r: &Repairer,
    rd: &Reading,
    question_start: f64,
    frame_start: bool,
    words: usize,
) -> f64 {
    let first = &rd.words[0].0;
    r.lm.ln_unigram(&rd.words[0].1)
        + start_lift(first, question_start)
        + if frame_start {
            frame_lift(r, first, false, words, false)
        } else {
            0.0
        }
}

/// What the language model gives each reading of a path from [`best_path`] where it stands:
/// its first word after the last word of the reading before it (or as the query's first), the
/// inside of a split, and a frame word's lift at the end. Less the readings' costs, they sum to
/// the path's score; `--explain` shows them (why a pair outweighed a cheaper edit).
pub(crate) fn path_terms(
    r: &Repairer,
    readings: &[Vec<Reading>],
    path: &[(usize, usize)],
    question_start: f64,
) -> Vec<f64> {
    let n = readings.len();
    let frame_start = frame_start(r, readings);
    let asks_meaning = asks_what_it_means(readings);
    let mut before: Option<&(CompactString, WordStats)> = None;
    path.iter()
        .map(|&(b, ri)| {
            let rd = &readings[b][ri];
            let (first, first_stats) = (&rd.words[0].0, &rd.words[0].1);
            let entry = match before {
                None => ln_start(r, rd, question_start, frame_start, n),
                Some((word, stats)) => r.lm.ln_bigram(word, stats, first, first_stats),
            };
            let last = &rd.words[rd.words.len() - 1];
            before = Some(last);
            let end = if b + rd.span == n {
                frame_lift(r, &last.0, true, n, asks_meaning)
            } else {
                0.0
            };
            entry + ln_inside(r, rd) + end
        })
        .collect()
}

/// The best sequence of readings, as (position, reading index) pairs, and its score. `forced`
/// positions may only be read as typed; a question word read first gains `question_start`
/// ([`question_start_lift`]), a word that asks about the others read first or last
/// [`super::Params::frame_word_lift`].
pub(crate) fn best_path(
    r: &Repairer,
    readings: &[Vec<Reading>],
    forced: &[usize],
    question_start: f64,
    memo: &mut Transitions,
) -> (Vec<(usize, usize)>, f64) {
    let n = readings.len();
    let frame_start = frame_start(r, readings);
    let asks_meaning = asks_what_it_means(readings);
    // Most boundaries end one or two states: kept in place, not allocated one by one.
    let mut states: Vec<smallvec::SmallVec<[State; 2]>> =
        (0..=n).map(|_| smallvec::SmallVec::new()).collect();
    states[0].push(State {
        word: "",
        stats: WordStats::default(),
        score: 0.0,
        back: None,
    });
    for b in 0..n {
        if states[b].is_empty() {
            continue;
        }
        for (ri, rd) in readings[b].iter().enumerate() {
            if rd.kind.is_some()
                && (forced.contains(&b) || (rd.span == 2 && forced.contains(&(b + 1))))
            {
                continue;
            }
            let to = b + rd.span;
            if to > n {
                continue;
            }
            // The inside of the reading (a split's second word) does not depend on the state.
            let inner = ln_inside(r, rd);
            let (first, first_stats) = (&rd.words[0].0, &rd.words[0].1);
            let mut best: Option<(f64, usize)> = None;
            for (si, s) in states[b].iter().enumerate() {
                let lm = match s.back {
                    None => ln_start(r, rd, question_start, frame_start, n),
                    Some((pb, _, pri)) => *memo
                        .scores
                        .entry((pb as u32, pri as u32, b as u32, ri as u32))
                        .or_insert_with(|| r.lm.ln_bigram(s.word, &s.stats, first, first_stats)),
                };
                let score = s.score + lm + inner - rd.cost;
                if best.is_none_or(|(bs, _)| score > bs) {
                    best = Some((score, si));
                }
            }
            let Some((score, si)) = best else { continue };
            let (last, last_stats) = &rd.words[rd.words.len() - 1];
            let (last, last_stats) = (last.as_str(), *last_stats);
            let score = if to == n {
                score + frame_lift(r, last, true, n, asks_meaning)
            } else {
                score
            };
            match states[to].iter_mut().find(|s| s.word == last) {
                Some(s) if s.score >= score => {}
                Some(s) => {
                    s.score = score;
                    s.stats = last_stats;
                    s.back = Some((b, si, ri));
                }
                None => states[to].push(State {
                    word: last,
                    stats: last_stats,
                    score,
                    back: Some((b, si, ri)),
                }),
            }
        }
    }
    let Some((mut si, end)) = states[n]
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.score.total_cmp(&b.1.score))
        .map(|(i, s)| (i, s.score))
    else {
        return (Vec::new(), f64::NEG_INFINITY);
    };
    let mut path = Vec::new();
    let mut at = n;
    while let Some((b, psi, ri)) = states[at][si].back {
        path.push((b, ri));
        at = b;
        si = psi;
    }
    path.reverse();
    (path, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_words_one_edit_away_are_all_found_in_the_lists_order() {
        let mut typed: Vec<Vec<u8>> = vec![b"".to_vec(), b"x".to_vec(), b"zzzzzz".to_vec()];
        for w in STOPWORDS {
            let w = w.as_bytes();
            typed.push(w.to_vec());
            for i in 0..=w.len() {
                if i < w.len() {
                    typed.push([&w[..i], &w[i + 1..]].concat());
                    typed.push([&w[..i], b"q", &w[i + 1..]].concat());
                }
                typed.push([&w[..i], b"e", &w[i..]].concat());
                if i + 1 < w.len() {
                    typed.push([&w[..i], &[w[i + 1], w[i]], &w[i + 2..]].concat());
                }
            }
        }
        for t in &typed {
            let near = function_words_one_edit_from(t);
            let want: Vec<&str> = STOPWORDS
                .iter()
                .copied()
                .filter(|m| error_model::distance(t, m.as_bytes(), 1) <= 1)
                .collect();
            let found: Vec<&str> = near.iter().copied().filter(|m| want.contains(m)).collect();
            assert_eq!(found, want, "{}", String::from_utf8_lossy(t));
            let order: Vec<usize> = near
                .iter()
                .map(|m| STOPWORDS.iter().position(|s| s == m).unwrap_or(usize::MAX))
                .collect();
            assert!(order.windows(2).all(|p| p[0] < p[1]), "{order:?}");
        }
        assert!(function_words_one_edit_from(b"teh").contains(&"the"));
    }

    #[test]
    fn an_american_spelling_gives_its_british_ones() {
        for (american, british) in [
            ("colors", "colours"),
            ("theater", "theatre"),
            ("centers", "centres"),
            ("anemia", "anaemia"),
            ("estrogen", "oestrogen"),
            ("traveled", "travelled"),
            ("organize", "organise"),
            ("glycerin", "glycerine"),
        ] {
            assert_eq!(
                british_spelling(american, |s| (s == british).then(|| s.to_string())),
                Some(british.to_string())
            );
        }
        // A typo is no spelling: `source` has no `-our`, `until` no `-ll`.
        assert_eq!(
            british_spelling("sorce", |s| (s == "source").then_some(())),
            None
        );
        assert_eq!(
            british_spelling("until", |s| (s == "untill").then_some(())),
            None
        );
    }

    #[test]
    fn spelling_variants_are_told_from_typos() {
        for (a, b) in [
            ("color", "colour"),
            ("theater", "theatre"),
            ("theaters", "theatres"),
            ("organize", "organise"),
            ("analyzed", "analysed"),
            ("organization", "organisation"),
            ("traveled", "travelled"),
            ("hemorrhage", "haemorrhage"),
            ("glycerin", "glycerine"),
            ("favorite", "favourite"),
            ("neighborhood", "neighbourhood"),
            ("colorful", "colourful"),
            ("behaviors", "behaviours"),
        ] {
            assert!(spelling_variant(a, b), "{a}/{b}");
            assert!(spelling_variant(b, a), "{b}/{a}");
        }
        for (typed, meant) in [
            ("hypretrophy", "hypertrophy"),
            ("proceduer", "procedure"),
            ("buzy", "busy"),
            ("peopl", "people"),
            ("activ", "active"),
            ("untill", "until"),
            ("definae", "define"),
            ("sorce", "source"),
            ("corse", "course"),
            ("flor", "flour"),
            ("onlin", "online"),
            ("machin", "machine"),
        ] {
            assert!(!spelling_variant(typed, meant), "{typed}/{meant}");
        }
    }

    #[test]
    fn a_doubling_moved_keeps_the_letters_in_order() {
        assert!(doubling_moved(b"hapenn", b"happen"));
        assert!(doubling_moved(b"dissmis", b"dismiss"));
        assert!(doubling_moved(b"begginers", b"beginners"));
        assert!(doubling_moved(b"scrren", b"screen"));
        // One doubling added or dropped is one edit, and another letter no doubling.
        assert!(!doubling_moved(b"hapen", b"happen"));
        assert!(!doubling_moved(b"happen", b"happen"));
        assert!(!doubling_moved(b"hapenm", b"happen"));
        assert!(!doubling_moved(b"hpapen", b"happen"));
    }

    #[test]
    fn a_doubling_lost_is_one_letter_written_once_or_twice() {
        assert!(doubling_lost(b"ferari", b"ferrari"));
        assert!(doubling_lost(b"untill", b"until"));
        assert!(doubling_lost(b"llupus", b"lupus"));
        // A letter left out that doubles nothing, or a doubling moved, is another slip.
        assert!(!doubling_lost(b"fraud", b"fraued"));
        assert!(!doubling_lost(b"hapenn", b"happen"));
        assert!(!doubling_lost(b"ferrari", b"ferrari"));
        assert!(!doubling_lost(b"soccor", b"soccer"));
    }

    #[test]
    fn a_slip_of_the_hand_names_the_likeliest_word_alone() {
        use crate::index::vocab::Vocabulary;
        use crate::repair::Lexicon;
        use std::sync::Arc;
        let words = [
            ("coffee", 75_000_000),
            ("leader", 60_000_000),
            ("ladder", 10_000_000),
            ("mean", 300_000_000),
        ];
        let pairs: [(&str, &str, u64); 0] = [];
        let usage = [
            ("coffee", 72_444),
            ("leader", 20_000),
            ("ladder", 6_000),
            ("mean", 338_844),
        ];
        let lexicon = Arc::new(Lexicon::from_counts(words, pairs).with_usage(usage));
        let r = Repairer::new(
            Arc::new(Vocabulary::build([("", "")].into_iter())),
            Some(lexicon),
        );
        let slipped = |q: &str| {
            let words = super::super::query::scan(q, &r.lm, &|_| false).unwrap_or_default();
            let mut lookups = Lookups::default();
            let found = candidates_of(&r, &words[0].lower, &mut lookups);
            let mut channel = vec![None; found.len()];
            slipped_from(&r, &words[0], &found, &mut channel)
                .map(|id| r.candidates.word(id).to_string())
        };
        assert_eq!(slipped("coffe").as_deref(), Some("coffee"));
        assert_eq!(slipped("mena").as_deref(), Some("mean"));
        // A capital or a possessive marks a name as often as a slip (`Nevile Henderson`).
        assert_eq!(slipped("Coffe"), None);
        assert_eq!(slipped("coffe's"), None);
        // `leader`, a letter lost, is likelier than `ladder` (`lader`).
        assert_eq!(slipped("lader"), None);
        // A letter written twice is another slip (`coffeee`), and a word two edits away is no
        // slip's.
        assert_eq!(slipped("coffeee"), None);
        assert_eq!(slipped("cofe"), None);
    }

    #[test]
    fn a_letter_lost_inside_is_neither_the_first_nor_the_last() {
        assert!(inner_letter_lost(b"brusing", b"bruising"));
        assert!(inner_letter_lost(b"mechnic", b"mechanic"));
        assert!(inner_letter_lost(b"ferari", b"ferrari"));
        // The first or the last letter lost, a letter added, one changed: other slips.
        assert!(!inner_letter_lost(b"ruising", b"bruising"));
        assert!(!inner_letter_lost(b"bruisin", b"bruising"));
        assert!(!inner_letter_lost(b"bruiising", b"bruising"));
        assert!(!inner_letter_lost(b"brusong", b"bruising"));
        assert!(!inner_letter_lost(b"bruising", b"bruising"));
        assert!(!inner_letter_lost(b"", b"a"));
    }

    #[test]
    fn a_first_letter_standing_alone_before_the_rest_is_not_lost() {
        assert!(first_letter_lost(None, b"ccounts", b"accounts", 6));
        assert!(first_letter_lost(Some("the"), b"ccounts", b"accounts", 6));
        assert!(!first_letter_lost(Some("a"), b"ccounts", b"accounts", 6));
        assert!(!first_letter_lost(
            Some("n"),
            b"europathic",
            b"neuropathic",
            6
        ));
        // From the given letters: shorter words lose their first letter into other words.
        assert!(first_letter_lost(None, b"ecipe", b"recipe", 6));
        assert!(!first_letter_lost(None, b"ecipe", b"recipe", 7));
        assert!(!first_letter_lost(None, b"lbow", b"elbow", 6));
    }

    #[test]
    fn a_lost_final_e_is_a_typo_and_an_ending_a_form() {
        assert!(!inflected_form("peopl", "people"));
        assert!(inflected_form("symptom", "symptoms"));
        assert!(inflected_form("chatbots", "chatbot"));
        assert!(inflected_form("larvae", "larva"));
        assert!(inflected_form("safer", "safe"));
        assert!(inflected_form("taxed", "taxes"));
        assert!(inflected_form("analyzer", "analyzed"));
        // `ther` is `there` or `their` with a letter lost, not `the` with one added.
        assert!(inflected_form("ther", "the"));
    }

    #[test]
    fn three_word_splits_take_no_acronym_piece() {
        use crate::index::vocab::Vocabulary;
        use crate::repair::Lexicon;
        use std::sync::Arc;
        let words = [
            ("rest", 60_000_000),
            ("or", 2_000_000_000),
            ("il", 5_000_000),
            ("bank", 150_000_000),
            ("of", 13_000_000_000),
            ("america", 300_000_000),
        ];
        let pairs = [
            ("rest", "or", 10_000_000),
            ("or", "il", 7_000_000),
            ("bank", "of", 30_000_000),
        ];
        let usage = [("rest", 80_000), ("or", 3_800_000), ("il", 5_000)];
        let lexicon = Lexicon::from_counts(words, pairs).with_usage(usage);
        let vocab = Arc::new(Vocabulary::build([("", "nothing here")].into_iter()));
        let r = Repairer::new(vocab, Some(Arc::new(lexicon)));
        let read = |word: &str| -> Vec<String> {
            splits(&r, word, false, true, ArticleSplit::No, false, false)
                .iter()
                .map(|s| {
                    s.words
                        .iter()
                        .map(|w| w.0.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect()
        };
        assert_eq!(read("bankofamerica"), ["bank of america"]);
        // `il` is an acronym beside `or`, which a two-word split may take, a three-word one not.
        assert!(read("restoril").is_empty(), "{:?}", read("restoril"));
    }

    #[test]
    fn a_letter_added_or_mistyped_at_the_end_is_a_slip_not_a_form() {
        for (typed, meant) in [
            ("passs", "pass"),
            ("typess", "types"),
            ("clas", "class"),
            ("freee", "free"),
            ("cloude", "cloud"),
            ("lastr", "last"),
            ("doese", "does"),
            ("doess", "does"),
            ("doed", "does"),
            ("weree", "were"),
            // Another last letter is an ending only after the stem's `e` (`taxes`/`taxed`);
            // else it is a key struck beside the right one.
            ("worls", "world"),
            ("wors", "word"),
        ] {
            assert!(!inflected_form(typed, meant), "{typed}/{meant}");
        }
    }
}
