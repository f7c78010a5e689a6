//! The live segment: documents written since the frozen index was built, searched exactly, and
//! the frozen documents they replace or delete, hidden from the frozen index's answers.
//!
//! Every change carries its operation id, and a document or a delete takes effect only over an
//! older one, so applying two batches in either order gives the state their log order gives.

use std::collections::{HashMap, HashSet};

use super::{LiveDocument, Operation};
use crate::index::quantized::{dot_u4_i8_rows, i4_padded, quantize_i4_into, quantize_i8};
use crate::index::vectors::dot;

/// Heap bytes a tombstone takes besides its id (map entry and operation id), roughly.
const TOMBSTONE_OVERHEAD: usize = 40;
/// Heap bytes a word of [`Segment::has_word`] takes besides its letters, roughly.
const WORD_OVERHEAD: usize = 40;

/// Keeps the `k` highest-scored entries of `v` (in no order).
fn top(v: &mut Vec<(f32, usize)>, k: usize) {
    if v.len() > k && k > 0 {
        v.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
    }
    v.truncate(k);
}

/// A document of the live segment, without its vector.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDocument {
    pub id: String,
    pub title: String,
    pub text: String,
    pub metadata: Option<serde_json::Value>,
    /// Operation id of the write that put it here.
    pub seq: u64,
}

/// A hit in the live segment.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveHit {
    pub score: f32,
    pub document: StoredDocument,
}

/// Live documents up to which a search scores every float32 vector; above it a 4-bit copy picks
/// the candidates (an eighth of the memory to read) and float32 re-scores them.
const EXACT_SCAN_UP_TO: usize = 512;

/// The live documents and the tombstones, with their vectors in one contiguous block.
pub struct Segment {
    dim: usize,
    vectors: Vec<f32>,
    /// 4-bit copy of `vectors` (`max|x| / 7` per row in `scales`, [`quantize_i4_into`]) for the
    /// candidate scan.
    codes: Vec<u8>,
    scales: Vec<f32>,
    slots: Vec<Option<StoredDocument>>,
    /// Whether each slot holds a document: what the scan reads instead of the slots themselves
    /// (a byte a slot, not a cache line).
    occupied: Vec<bool>,
    free: Vec<usize>,
    by_id: HashMap<String, usize>,
    /// Deleted ids and the id of the delete: they hold off older upserts applied late, and hide
    /// the frozen index's copy until a new version drops it.
    deleted: HashMap<String, u64>,
    /// Frozen documents (by internal index) that a live document replaces or a delete removes.
    hidden: HashSet<usize>,
    text_bytes: usize,
    /// Bytes of the tombstones' ids, kept as they change (reported after every write).
    tombstone_bytes: usize,
    /// The words of the live documents (lower-case ASCII letter runs, as query repair reads a
    /// query) and in how many documents each is: query repair leaves them as typed, since the
    /// frozen index's vocabulary does not know them.
    words: HashMap<Box<str>, u32>,
    word_bytes: usize,
}

/// The distinct words of a document as query repair reads words: runs of ASCII letters, in
/// lower case.
fn words_of(d: &StoredDocument) -> HashSet<String> {
    [d.title.as_str(), d.text.as_str()]
        .iter()
        .flat_map(|t| t.split(|c: char| !c.is_ascii_alphabetic()))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
        .collect()
}

impl Segment {
    /// An empty segment of `dim`-dimensional vectors.
    pub fn new(dim: usize) -> Self {
        Segment {
            dim,
            vectors: Vec::new(),
            codes: Vec::new(),
            scales: Vec::new(),
            slots: Vec::new(),
            occupied: Vec::new(),
            free: Vec::new(),
            by_id: HashMap::new(),
            deleted: HashMap::new(),
            hidden: HashSet::new(),
            text_bytes: 0,
            tombstone_bytes: 0,
            words: HashMap::new(),
            word_bytes: 0,
        }
    }

    /// Bytes of one row's 4-bit codes.
    fn code_bytes(&self) -> usize {
        i4_padded(self.dim) / 2
    }

    /// Whether a live document holds `word` (lower case).
    pub fn has_word(&self, word: &str) -> bool {
        self.words.contains_key(word)
    }

    fn count_words(&mut self, d: &StoredDocument) {
        for w in words_of(d) {
            match self.words.get_mut(w.as_str()) {
                Some(n) => *n += 1,
                None => {
                    self.word_bytes += w.len() + WORD_OVERHEAD;
                    self.words.insert(w.into_boxed_str(), 1);
                }
            }
        }
    }

    fn uncount_words(&mut self, d: &StoredDocument) {
        for w in words_of(d) {
            if let Some(n) = self.words.get_mut(w.as_str()) {
                *n -= 1;
                if *n == 0 {
                    self.words.remove(w.as_str());
                    self.word_bytes -= w.len() + WORD_OVERHEAD;
                }
            }
        }
    }

    /// Applies one logged batch; `frozen` finds an id's internal index in the frozen index.
    pub fn apply(&mut self, seq: u64, op: &Operation, frozen: &dyn Fn(&str) -> Option<usize>) {
        match op {
            Operation::Upsert(docs) => {
                for d in docs {
                    self.upsert(seq, d, frozen);
                }
            }
            Operation::Delete(ids) => {
                for id in ids {
                    self.delete(seq, id, frozen);
                }
            }
        }
    }

    fn upsert(&mut self, seq: u64, d: &LiveDocument, frozen: &dyn Fn(&str) -> Option<usize>) {
        if self.deleted.get(&d.id).is_some_and(|&s| s > seq) || d.vector.len() != self.dim {
            return;
        }
        if let Some(&slot) = self.by_id.get(&d.id) {
            if self.slots[slot].as_ref().is_some_and(|s| s.seq > seq) {
                return;
            }
            self.remove_slot(slot);
        }
        if self.deleted.remove(&d.id).is_some() {
            self.tombstone_bytes -= d.id.len() + TOMBSTONE_OVERHEAD;
        }
        if let Some(i) = frozen(&d.id) {
            self.hidden.insert(i);
        }
        let stored = StoredDocument {
            id: d.id.clone(),
            title: d.title.clone(),
            text: d.text.clone(),
            metadata: d.metadata.clone(),
            seq,
        };
        self.text_bytes += stored.id.len() + stored.title.len() + stored.text.len();
        self.count_words(&stored);
        let mut codes = Vec::with_capacity(self.code_bytes());
        let scale = quantize_i4_into(&d.vector, &mut codes);
        let slot = match self.free.pop() {
            Some(slot) => {
                let row = slot * self.dim..(slot + 1) * self.dim;
                self.vectors[row].copy_from_slice(&d.vector);
                let bytes = self.code_bytes();
                self.codes[slot * bytes..(slot + 1) * bytes].copy_from_slice(&codes);
                self.scales[slot] = scale;
                self.slots[slot] = Some(stored);
                self.occupied[slot] = true;
                slot
            }
            None => {
                self.vectors.extend_from_slice(&d.vector);
                self.codes.extend(codes);
                self.scales.push(scale);
                self.slots.push(Some(stored));
                self.occupied.push(true);
                self.slots.len() - 1
            }
        };
        self.by_id.insert(d.id.clone(), slot);
    }

    fn delete(&mut self, seq: u64, id: &str, frozen: &dyn Fn(&str) -> Option<usize>) {
        if let Some(&slot) = self.by_id.get(id) {
            if self.slots[slot].as_ref().is_some_and(|s| s.seq > seq) {
                return;
            }
            self.remove_slot(slot);
        }
        match self.deleted.get_mut(id) {
            Some(at) => *at = (*at).max(seq),
            None => {
                self.deleted.insert(id.to_string(), seq);
                self.tombstone_bytes += id.len() + TOMBSTONE_OVERHEAD;
            }
        }
        if let Some(i) = frozen(id) {
            self.hidden.insert(i);
        }
    }

    fn remove_slot(&mut self, slot: usize) {
        if let Some(old) = self.slots[slot].take() {
            self.occupied[slot] = false;
            self.text_bytes -= old.id.len() + old.title.len() + old.text.len();
            self.uncount_words(&old);
            self.by_id.remove(&old.id);
            self.free.push(slot);
        }
    }

    /// The `k` live documents nearest `query`, best first, scored in float32. Above
    /// [`EXACT_SCAN_UP_TO`] documents the 4-bit copy, scored against the query in int8, picks
    /// `4k + 32` candidates first (its error is far below the gap that would push a true hit out
    /// of so many).
    pub fn search(&self, query: &[f32], k: usize) -> Vec<LiveHit> {
        self.search_counting(query, k, None).0
    }

    /// [`Segment::search`] among the documents `admit` passes (all without it), with how many
    /// it passed: the filter is applied to every slot first, so the scan scores only admitted
    /// documents (all of them exactly when they are few).
    pub fn search_counting(
        &self,
        query: &[f32],
        k: usize,
        admit: Option<&dyn Fn(&StoredDocument) -> bool>,
    ) -> (Vec<LiveHit>, usize) {
        let dim = self.dim;
        let admitted: Option<Vec<bool>> = admit.map(|admit| {
            self.slots
                .iter()
                .map(|s| s.as_ref().is_some_and(admit))
                .collect()
        });
        let mask: &[bool] = admitted.as_deref().unwrap_or(&self.occupied);
        let count = match &admitted {
            Some(a) => a.iter().filter(|&&x| x).count(),
            None => self.by_id.len(),
        };
        let live = mask.iter().enumerate().filter(|(_, &o)| o).map(|(i, _)| i);
        let exact = |i: usize| dot(query, &self.vectors[i * dim..(i + 1) * dim]);
        let mut scored: Vec<(f32, usize)> =
            if count <= EXACT_SCAN_UP_TO.max(k.saturating_mul(4).saturating_add(32)) {
                live.map(|i| (exact(i), i)).collect()
            } else {
                // The query in int8 (zeros to whole blocks), the rows in 4 bits: the stored codes
                // are offset by 8, which the query's sum takes back.
                let (mut q, q_scale) = quantize_i8(query);
                let offset = 8 * q.iter().map(|&c| i32::from(c)).sum::<i32>();
                q.resize(i4_padded(self.dim), 0);
                let keep = k.saturating_mul(4).saturating_add(32);
                let mut dots = Vec::with_capacity(self.occupied.len());
                dot_u4_i8_rows(&q, &self.codes, &mut dots);
                // The best `keep` so far, with room for as many again: a row below the worst of
                // those kept can never be among them, and most rows stop at that comparison.
                let mut rough: Vec<(f32, usize)> = Vec::with_capacity(2 * keep);
                let mut floor = f32::NEG_INFINITY;
                for i in live {
                    let score = self.scales[i] * q_scale * (dots[i] - offset) as f32;
                    if score >= floor {
                        rough.push((score, i));
                        if rough.len() == 2 * keep {
                            top(&mut rough, keep);
                            floor = rough.iter().map(|r| r.0).fold(f32::INFINITY, f32::min);
                        }
                    }
                }
                top(&mut rough, keep);
                rough.into_iter().map(|(_, i)| (exact(i), i)).collect()
            };
        top(&mut scored, k);
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let hits = scored
            .into_iter()
            .filter_map(|(score, i)| {
                self.slots[i]
                    .clone()
                    .map(|document| LiveHit { score, document })
            })
            .collect();
        (hits, count)
    }

    /// Whether the frozen document at internal index `i` is replaced or deleted.
    pub fn hides(&self, i: usize) -> bool {
        self.hidden.contains(&i)
    }

    /// The frozen documents (internal indices) that are hidden.
    pub fn hidden_frozen(&self) -> impl Iterator<Item = usize> + '_ {
        self.hidden.iter().copied()
    }

    /// How many frozen documents are hidden.
    pub fn hidden(&self) -> usize {
        self.hidden.len()
    }

    /// The live document `id`, if any.
    pub fn get(&self, id: &str) -> Option<&StoredDocument> {
        self.by_id.get(id).and_then(|&s| self.slots[s].as_ref())
    }

    /// Whether `id` was deleted (and not written again since).
    pub fn is_deleted(&self, id: &str) -> bool {
        self.deleted.contains_key(id)
    }

    /// Live documents.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether the segment holds no live document.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Tombstones held.
    pub fn tombstones(&self) -> usize {
        self.deleted.len()
    }

    /// Bytes the segment holds on the heap (vectors, texts, ids), roughly.
    pub fn heap_bytes(&self) -> usize {
        self.vectors.capacity() * 4
            + self.codes.capacity()
            + self.scales.capacity() * 4
            + self.text_bytes
            + self.slots.capacity() * std::mem::size_of::<Option<StoredDocument>>()
            + self.occupied.capacity()
            + self.by_id.len() * 48
            + self.tombstone_bytes
            + self.hidden.len() * 16
            + self.word_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, v: [f32; 2]) -> LiveDocument {
        LiveDocument {
            id: id.into(),
            title: String::new(),
            text: format!("text of {id}"),
            metadata: None,
            vector: v.to_vec(),
        }
    }

    fn frozen(id: &str) -> Option<usize> {
        id.strip_prefix('f').and_then(|n| n.parse().ok())
    }

    #[test]
    fn the_words_of_live_documents_are_known_while_a_document_holds_them() {
        let mut s = Segment::new(2);
        let with = |id: &str, text: &str| LiveDocument {
            text: text.into(),
            ..doc(id, [1.0, 0.0])
        };
        let before = s.heap_bytes();
        s.apply(
            1,
            &Operation::Upsert(vec![with("a", "Vitamn-X, a new brand")]),
            &frozen,
        );
        s.apply(
            2,
            &Operation::Upsert(vec![with("b", "vitamn gummies")]),
            &frozen,
        );
        assert!(s.has_word("vitamn") && s.has_word("gummies") && s.has_word("x"));
        assert!(!s.has_word("Vitamn") && !s.has_word("vitamin"));
        assert!(s.heap_bytes() > before);
        // Replaced: its old words go unless another document holds them.
        s.apply(3, &Operation::Upsert(vec![with("a", "renamed")]), &frozen);
        assert!(s.has_word("vitamn") && !s.has_word("brand") && s.has_word("renamed"));
        s.apply(4, &Operation::Delete(vec!["b".into()]), &frozen);
        assert!(!s.has_word("vitamn") && !s.has_word("gummies"));
        s.apply(5, &Operation::Delete(vec!["a".into()]), &frozen);
        assert!(s.words.is_empty() && s.word_bytes == 0);
    }

    #[test]
    fn later_operations_win_whatever_order_they_are_applied_in() {
        let ops = [
            (
                1,
                Operation::Upsert(vec![doc("a", [1.0, 0.0]), doc("f3", [0.0, 1.0])]),
            ),
            (2, Operation::Delete(vec!["a".into()])),
            (3, Operation::Upsert(vec![doc("a", [0.6, 0.8])])),
            (4, Operation::Delete(vec!["f5".into()])),
        ];
        let mut forward = Segment::new(2);
        for (seq, op) in &ops {
            forward.apply(*seq, op, &frozen);
        }
        let mut backward = Segment::new(2);
        for (seq, op) in ops.iter().rev() {
            backward.apply(*seq, op, &frozen);
        }
        for s in [&forward, &backward] {
            assert_eq!(s.get("a").map(|d| d.seq), Some(3));
            assert_eq!(s.len(), 2);
            assert!(s.hides(3) && s.hides(5) && !s.hides(4));
            assert!(s.is_deleted("f5"));
            let hits = s.search(&[1.0, 0.0], 5);
            assert_eq!(hits[0].document.id, "a");
            assert!((hits[0].score - 0.6).abs() < 1e-6);
        }
    }

    #[test]
    fn a_large_segment_finds_what_scoring_every_vector_finds() {
        let dim = 48;
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut unit = || {
            let mut v: Vec<f32> = (0..dim)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    (rng >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= n);
            v
        };
        let mut s = Segment::new(dim);
        let docs: Vec<LiveDocument> = (0..3000)
            .map(|i| LiveDocument {
                id: format!("d{i}"),
                title: String::new(),
                text: String::new(),
                metadata: None,
                vector: unit(),
            })
            .collect();
        s.apply(1, &Operation::Upsert(docs.clone()), &frozen);
        s.apply(
            2,
            &Operation::Delete((0..3000).step_by(7).map(|i| format!("d{i}")).collect()),
            &frozen,
        );
        for _ in 0..50 {
            let q = unit();
            let mut all: Vec<(f32, &str)> = docs
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 7 != 0)
                .map(|(_, d)| (dot(&q, &d.vector), d.id.as_str()))
                .collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0));
            let hits = s.search(&q, 10);
            let got: Vec<&str> = hits.iter().map(|h| h.document.id.as_str()).collect();
            let want: Vec<&str> = all.iter().take(10).map(|x| x.1).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn a_freed_slot_is_reused_and_memory_is_counted() {
        let mut s = Segment::new(2);
        s.apply(1, &Operation::Upsert(vec![doc("a", [1.0, 0.0])]), &frozen);
        let before = s.heap_bytes();
        s.apply(2, &Operation::Delete(vec!["a".into()]), &frozen);
        s.apply(3, &Operation::Upsert(vec![doc("b", [0.0, 1.0])]), &frozen);
        assert_eq!(s.slots.len(), 1);
        assert!(s.heap_bytes() >= before);
        assert_eq!(s.search(&[0.0, 1.0], 3).len(), 1);
    }
}
