//! Tokenization as sentence-transformers does it: trimmed text, `[CLS] … [SEP]`, truncation at the
//! bundle's max length, padding to the longest text of the batch.

use std::path::Path;

use tokenizers::{
    PaddingDirection, PaddingParams, PaddingStrategy, Tokenizer, TruncationDirection,
    TruncationParams, TruncationStrategy,
};

use super::EncoderError;

/// A tokenized batch in row-major `[batch, sequence]` layout, ready for the ONNX inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBatch {
    pub batch: usize,
    pub sequence: usize,
    pub input_ids: Vec<i64>,
    pub attention_mask: Vec<i64>,
    pub token_type_ids: Vec<i64>,
}

impl TokenBatch {
    /// Joins batches tokenized separately into one, right-padding every row to the longest with
    /// `pad_id` (mask 0), so concurrent requests can share one inference.
    pub fn concat(parts: &[&TokenBatch], pad_id: i64) -> TokenBatch {
        let batch = parts.iter().map(|p| p.batch).sum();
        let sequence = parts.iter().map(|p| p.sequence).max().unwrap_or(0);
        let mut out = TokenBatch {
            batch,
            sequence,
            input_ids: Vec::with_capacity(batch * sequence),
            attention_mask: Vec::with_capacity(batch * sequence),
            token_type_ids: Vec::with_capacity(batch * sequence),
        };
        for p in parts {
            let pad = sequence - p.sequence;
            for r in 0..p.batch {
                let row = r * p.sequence..(r + 1) * p.sequence;
                out.input_ids.extend_from_slice(&p.input_ids[row.clone()]);
                out.input_ids.extend(std::iter::repeat_n(pad_id, pad));
                out.attention_mask
                    .extend_from_slice(&p.attention_mask[row.clone()]);
                out.attention_mask.extend(std::iter::repeat_n(0, pad));
                out.token_type_ids.extend_from_slice(&p.token_type_ids[row]);
                out.token_type_ids.extend(std::iter::repeat_n(0, pad));
            }
        }
        out
    }

    /// The rows `start..end` of the batch (same padded length).
    pub fn rows(&self, start: usize, end: usize) -> TokenBatch {
        let r = start * self.sequence..end * self.sequence;
        TokenBatch {
            batch: end - start,
            sequence: self.sequence,
            input_ids: self.input_ids[r.clone()].to_vec(),
            attention_mask: self.attention_mask[r.clone()].to_vec(),
            token_type_ids: self.token_type_ids[r].to_vec(),
        }
    }

    /// Number of real (non-padding) tokens in the batch.
    pub fn real_tokens(&self) -> usize {
        self.attention_mask.iter().filter(|m| **m != 0).count()
    }
}

/// A Hugging Face tokenizer with the bundle's padding and truncation enforced.
pub struct TextTokenizer {
    inner: Tokenizer,
    max_length: usize,
    prefix: Option<String>,
    pad_id: u32,
}

impl TextTokenizer {
    /// Loads `tokenizer.json`, overriding its padding (the MiniLM file pads to a fixed 128) and
    /// truncation with the bundle's settings.
    pub fn from_file(
        path: &Path,
        max_length: usize,
        prefix: Option<String>,
    ) -> Result<Self, EncoderError> {
        if !path.is_file() {
            return Err(EncoderError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::NotFound, "tokenizer file not found"),
            ));
        }
        let mut inner = Tokenizer::from_file(path).map_err(|e| EncoderError::Bundle {
            path: path.to_path_buf(),
            message: format!("invalid tokenizer: {e}"),
        })?;
        if max_length < 2 {
            return Err(EncoderError::Config(format!(
                "max length {max_length} leaves no room for text"
            )));
        }
        let (pad_id, pad_token) = match inner.get_padding() {
            Some(p) => (p.pad_id, p.pad_token.clone()),
            None => {
                let token = "[PAD]".to_string();
                (inner.token_to_id(&token).unwrap_or(0), token)
            }
        };
        inner.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            direction: PaddingDirection::Right,
            pad_to_multiple_of: None,
            pad_id,
            pad_type_id: 0,
            pad_token,
        }));
        inner
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| EncoderError::Config(format!("truncation: {e}")))?;
        Ok(TextTokenizer {
            inner,
            max_length,
            prefix,
            pad_id,
        })
    }

    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// The padding token's id.
    pub fn pad_id(&self) -> i64 {
        i64::from(self.pad_id)
    }

    /// The underlying tokenizer (for vocabulary look-ups such as the noise router's).
    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }

    /// Tokenizes a batch of texts. An empty text becomes `[CLS] [SEP]`, as in
    /// sentence-transformers; rejecting empty input is the caller's (CLI's, API's) decision.
    pub fn encode_batch<S: AsRef<str>>(&self, texts: &[S]) -> Result<TokenBatch, EncoderError> {
        if texts.is_empty() {
            return Ok(TokenBatch {
                batch: 0,
                sequence: 0,
                input_ids: vec![],
                attention_mask: vec![],
                token_type_ids: vec![],
            });
        }
        let mut inputs = Vec::with_capacity(texts.len());
        for t in texts {
            let trimmed = t.as_ref().trim();
            inputs.push(match &self.prefix {
                Some(p) => format!("{p}{trimmed}"),
                None => trimmed.to_string(),
            });
        }
        let encodings = self
            .inner
            .encode_batch(inputs, true)
            .map_err(|e| EncoderError::Tokenize(e.to_string()))?;
        let batch = encodings.len();
        let sequence = encodings
            .iter()
            .map(|e| e.get_ids().len())
            .max()
            .unwrap_or(0);
        let mut out = TokenBatch {
            batch,
            sequence,
            input_ids: Vec::with_capacity(batch * sequence),
            attention_mask: Vec::with_capacity(batch * sequence),
            token_type_ids: Vec::with_capacity(batch * sequence),
        };
        for e in &encodings {
            if e.get_ids().len() != sequence {
                return Err(EncoderError::Tokenize(
                    "batch was not padded to one length".into(),
                ));
            }
            out.input_ids
                .extend(e.get_ids().iter().map(|&v| i64::from(v)));
            out.attention_mask
                .extend(e.get_attention_mask().iter().map(|&v| i64::from(v)));
            out.token_type_ids
                .extend(e.get_type_ids().iter().map(|&v| i64::from(v)));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_assets;

    fn minilm() -> TextTokenizer {
        TextTokenizer::from_file(
            &test_assets::minilm_hf_dir().join("tokenizer.json"),
            256,
            None,
        )
        .expect("MiniLM tokenizer loads")
    }

    #[test]
    fn token_ids_equal_the_golden_ids() {
        let tok = minilm();
        let golden = test_assets::golden();
        let cases = golden["cases"].as_array().expect("cases");
        for case in cases {
            let text = case["text"].as_str().expect("text");
            let want: Vec<i64> = case["input_ids"]
                .as_array()
                .expect("ids")
                .iter()
                .map(|v| v.as_i64().expect("id"))
                .collect();
            let got = tok.encode_batch(&[text]).expect("tokenizes");
            assert_eq!(got.input_ids, want, "{text:?}");
            assert!(got.attention_mask.iter().all(|&m| m == 1));
            assert!(got.token_type_ids.iter().all(|&t| t == 0));
        }
    }

    #[test]
    fn pads_to_the_longest_text_and_truncates_at_max_length() {
        let tok = minilm();
        let b = tok
            .encode_batch(&["short", "a somewhat longer query text"])
            .unwrap();
        assert_eq!(b.batch, 2);
        assert!(
            b.sequence < 128,
            "the file's fixed padding to 128 is overridden"
        );
        assert_eq!(b.input_ids.len(), 2 * b.sequence);
        assert_eq!(b.attention_mask[..b.sequence].iter().sum::<i64>(), 3);
        let long = "word ".repeat(1000);
        let b = tok.encode_batch(&[long.as_str()]).unwrap();
        assert_eq!(b.sequence, 256);
        assert_eq!(b.input_ids[255], 102, "[SEP] survives truncation");
    }

    #[test]
    fn concat_repads_and_rows_split_back() {
        let tok = minilm();
        let a = tok.encode_batch(&["short"]).unwrap();
        let b = tok
            .encode_batch(&["a much longer text than the first", "mid text"])
            .unwrap();
        let joint = tok
            .encode_batch(&["short", "a much longer text than the first", "mid text"])
            .unwrap();
        let merged = TokenBatch::concat(&[&a, &b], tok.pad_id());
        assert_eq!(merged, joint, "same as tokenizing together");
        assert_eq!(
            merged.rows(1, 3),
            b,
            "b is the longest, so its rows come back unchanged"
        );
    }

    #[test]
    fn empty_text_is_cls_sep() {
        let b = minilm().encode_batch(&["", "  \t"]).unwrap();
        assert_eq!(b.input_ids, vec![101, 102, 101, 102]);
    }

    #[test]
    fn missing_or_corrupt_tokenizer_is_an_error() {
        assert!(TextTokenizer::from_file(
            std::path::Path::new("/nonexistent/tokenizer.json"),
            16,
            None
        )
        .is_err());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        std::fs::write(&p, "{not json").unwrap();
        assert!(TextTokenizer::from_file(&p, 16, None).is_err());
    }
}
