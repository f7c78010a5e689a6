//! Reads ONNX encoders that users bring themselves (torch.onnx, optimum, capot's own writer).
//!
//! Three things are needed to import such a file: decoding it ([`decode_model`]), knowing how to
//! feed and read it ([`inspect_signature`]), and, so it can be aligned further, the BERT weights
//! in canonical form ([`recover_bert_weights`]). Recovery may fail for graphs that are not a plain
//! BERT export (quantised, fused, unusual names); the error then says why and the caller can
//! still serve the file as it is.

use std::collections::{BTreeMap, HashMap};

use prost::Message;

use super::onnx_proto::{
    tensor_proto::{DataLocation, DataType},
    tensor_shape_proto::dimension,
    GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto,
};
use super::onnx_writer::TRANSPOSED_SUFFIX;
use super::weights::{canonical_name, required_names};
use super::{BertConfig, BertWeights, ModelError, WeightTensor};

/// Decodes a serialized ONNX `ModelProto`; garbage or a model without a graph is an error.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto, ModelError> {
    if bytes.is_empty() {
        return Err(ModelError::OnnxDecode("the file is empty".into()));
    }
    let model = ModelProto::decode(bytes).map_err(|e| ModelError::OnnxDecode(e.to_string()))?;
    if model.ir_version <= 0 {
        return Err(ModelError::OnnxDecode(
            "no ir_version: this is not an ONNX model".into(),
        ));
    }
    match &model.graph {
        Some(g) if !g.node.is_empty() => Ok(model),
        _ => Err(ModelError::OnnxDecode(
            "the model has no graph nodes".into(),
        )),
    }
}

/// Integer element type of a token input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdType {
    Int64,
    Int32,
}

/// One graph input the encoder must be fed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxInput {
    pub name: String,
    pub elem_type: IdType,
}

/// What the chosen output holds, which decides whether the caller still has to pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// `[batch, sequence, hidden]` token vectors (last hidden state): the caller pools.
    TokenEmbeddings,
    /// `[batch, hidden]` sentence vector already pooled in the graph (e.g. `sentence_embedding`).
    SentenceEmbedding,
    /// `[batch, hidden]` BERT pooler output (`tanh(dense(CLS))`), rarely a good sentence vector.
    PoolerOutput,
}

/// How to call an ONNX encoder: which inputs carry what, and which output to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxSignature {
    pub input_ids: OnnxInput,
    pub attention_mask: OnnxInput,
    /// Absent when the graph has no token-type input (it then assumes all zeros).
    pub token_type_ids: Option<OnnxInput>,
    pub output: String,
    pub output_kind: OutputKind,
    /// Last dimension of the output when the file states it.
    pub dimension: Option<usize>,
}

/// The role of a graph input, from its name.
fn input_role(name: &str) -> Option<usize> {
    let n = name.to_ascii_lowercase();
    if n.contains("mask") {
        Some(1)
    } else if n.contains("token_type") || n.contains("segment") {
        Some(2)
    } else if n.contains("input_ids") || n.contains("token_ids") || n == "ids" || n == "input" {
        Some(0)
    } else {
        None
    }
}

/// Element type and shape (`None` per unknown axis; `None` overall when no shape is given).
fn value_type(v: &ValueInfoProto) -> Option<(i32, Option<Vec<Option<i64>>>)> {
    let t = v.r#type.as_ref()?.tensor()?;
    let shape = t.shape.as_ref().map(|s| {
        s.dim
            .iter()
            .map(|d| match d.value {
                Some(dimension::Value::DimValue(v)) => Some(v),
                _ => None,
            })
            .collect()
    });
    Some((t.elem_type, shape))
}

fn data_type_name(t: i32) -> String {
    DataType::try_from(t)
        .map(|d| format!("{d:?}").to_lowercase())
        .unwrap_or_else(|_| format!("type {t}"))
}

/// Classifies the graph's inputs and picks the output to read (see [`OnnxSignature`]).
pub fn inspect_signature(model: &ModelProto) -> Result<OnnxSignature, ModelError> {
    let graph = graph_of(model)?;
    let initializers: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let mut slots: [Option<OnnxInput>; 3] = [None, None, None];
    let mut unexpected = Vec::new();
    for input in graph
        .input
        .iter()
        .filter(|i| !initializers.contains(i.name.as_str()))
    {
        let Some(role) = input_role(&input.name) else {
            unexpected.push(input.name.clone());
            continue;
        };
        let (elem, shape) = value_type(input)
            .ok_or_else(|| ModelError::Graph(format!("input {:?} is not a tensor", input.name)))?;
        let elem_type = match DataType::try_from(elem) {
            Ok(DataType::Int64) => IdType::Int64,
            Ok(DataType::Int32) => IdType::Int32,
            _ => {
                return Err(ModelError::Graph(format!(
                    "input {:?} has element type {}, expected int64 or int32",
                    input.name,
                    data_type_name(elem)
                )))
            }
        };
        if let Some(shape) = shape {
            if shape.len() != 2 {
                return Err(ModelError::Graph(format!(
                    "input {:?} has rank {}, expected [batch, sequence]",
                    input.name,
                    shape.len()
                )));
            }
        }
        if let Some(prev) = &slots[role] {
            return Err(ModelError::Graph(format!(
                "inputs {:?} and {:?} both look like {}",
                prev.name,
                input.name,
                ["token ids", "an attention mask", "token type ids"][role]
            )));
        }
        slots[role] = Some(OnnxInput {
            name: input.name.clone(),
            elem_type,
        });
    }
    if !unexpected.is_empty() {
        return Err(ModelError::Graph(format!(
            "unexpected graph input(s) {unexpected:?}: only input_ids, attention_mask and \
             token_type_ids can be fed"
        )));
    }
    let [ids, mask, types] = slots;
    let input_ids = ids.ok_or_else(|| {
        ModelError::Graph("no token-ids input (a name containing \"input_ids\")".into())
    })?;
    let attention_mask = mask.ok_or_else(|| {
        ModelError::Graph("no attention-mask input (a name containing \"attention_mask\")".into())
    })?;

    // Output: named rank-3 > any rank-3 > named rank-2 > any rank-2.
    let mut best: Option<(u8, &ValueInfoProto, OutputKind, Option<usize>)> = None;
    let mut seen = Vec::new();
    for out in &graph.output {
        let Some((elem, shape)) = value_type(out) else {
            seen.push(format!("{} (not a tensor)", out.name));
            continue;
        };
        let lname = out.name.to_ascii_lowercase();
        let hidden_name = lname.contains("last_hidden_state") || lname.contains("token_embeddings");
        let pooled_name = lname.contains("sentence_embedding")
            || lname.contains("pooler_output")
            || lname.contains("embedding");
        let rank = match &shape {
            Some(s) => Some(s.len()),
            None if hidden_name => Some(3),
            None if pooled_name => Some(2),
            None => None,
        };
        let dim = shape
            .as_ref()
            .and_then(|s| s.last().copied().flatten())
            .and_then(|d| usize::try_from(d).ok());
        seen.push(format!(
            "{} ({}, rank {})",
            out.name,
            data_type_name(elem),
            rank.map_or("unknown".into(), |r| r.to_string())
        ));
        let is_float = matches!(
            DataType::try_from(elem),
            Ok(DataType::Float | DataType::Float16 | DataType::Double | DataType::Bfloat16)
        );
        if !is_float {
            continue;
        }
        let (score, kind) = match rank {
            Some(3) if hidden_name => (4, OutputKind::TokenEmbeddings),
            Some(3) => (3, OutputKind::TokenEmbeddings),
            Some(2) if lname.contains("pooler") => (1, OutputKind::PoolerOutput),
            Some(2) if pooled_name => (2, OutputKind::SentenceEmbedding),
            Some(2) => (1, OutputKind::SentenceEmbedding),
            _ => continue,
        };
        if best.as_ref().is_none_or(|b| score > b.0) {
            best = Some((score, out, kind, dim));
        }
    }
    let Some((_, out, output_kind, dimension)) = best else {
        return Err(ModelError::Graph(format!(
            "no usable output: need a float [batch, sequence, hidden] or [batch, hidden] \
             tensor; the graph has {}",
            if seen.is_empty() {
                "no outputs".into()
            } else {
                seen.join(", ")
            }
        )));
    };
    Ok(OnnxSignature {
        input_ids,
        attention_mask,
        token_type_ids: types,
        output: out.name.clone(),
        output_kind,
        dimension,
    })
}

fn graph_of(model: &ModelProto) -> Result<&GraphProto, ModelError> {
    model
        .graph
        .as_ref()
        .ok_or_else(|| ModelError::OnnxDecode("the model has no graph".into()))
}

fn recovery(msg: impl Into<String>) -> ModelError {
    ModelError::Recovery(msg.into())
}

/// An initializer's values as f32 (float, float16, bfloat16 and double tensors).
fn tensor_f32(t: &TensorProto) -> Result<Vec<f32>, ModelError> {
    if t.data_location == DataLocation::External as i32 || !t.external_data.is_empty() {
        return Err(recovery(format!(
            "tensor {:?} keeps its data in an external file, which is not supported",
            t.name
        )));
    }
    let raw = &t.raw_data;
    let data: Vec<f32> = match DataType::try_from(t.data_type) {
        Ok(DataType::Float) if !raw.is_empty() => raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Ok(DataType::Float) => t.float_data.clone(),
        Ok(DataType::Double) if !raw.is_empty() => raw
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32)
            .collect(),
        Ok(DataType::Double) => t.double_data.iter().map(|&v| v as f32).collect(),
        Ok(DataType::Float16) if !raw.is_empty() => raw
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        // 16-bit types without raw_data are stored one value per int32_data entry.
        Ok(DataType::Float16) => t
            .int32_data
            .iter()
            .map(|&v| half::f16::from_bits(v as u16).to_f32())
            .collect(),
        Ok(DataType::Bfloat16) if !raw.is_empty() => raw
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Ok(DataType::Bfloat16) => t
            .int32_data
            .iter()
            .map(|&v| half::bf16::from_bits(v as u16).to_f32())
            .collect(),
        _ => {
            return Err(recovery(format!(
                "tensor {:?} has element type {} (a quantised model?); only floating-point \
                 weights can be recovered",
                t.name,
                data_type_name(t.data_type)
            )))
        }
    };
    let shape = t
        .shape()
        .ok_or_else(|| recovery(format!("tensor {:?} has a negative dimension", t.name)))?;
    let needed = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if needed != Some(data.len()) {
        return Err(recovery(format!(
            "tensor {:?}: shape {:?} does not match its {} values",
            t.name,
            shape,
            data.len()
        )));
    }
    Ok(data)
}

/// An integer tensor's values (int64 or int32), or `None`.
fn tensor_i64(t: &TensorProto) -> Option<Vec<i64>> {
    let raw = &t.raw_data;
    match DataType::try_from(t.data_type).ok()? {
        DataType::Int64 if !raw.is_empty() => Some(
            raw.chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
        DataType::Int64 => Some(t.int64_data.clone()),
        DataType::Int32 if !raw.is_empty() => Some(
            raw.chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
        ),
        DataType::Int32 => Some(t.int32_data.iter().map(|&v| i64::from(v)).collect()),
        _ => None,
    }
}

/// Lookups over one graph: initializers by name, producers and consumers of each value.
struct GraphIndex<'a> {
    initializers: HashMap<&'a str, &'a TensorProto>,
    producer: HashMap<&'a str, &'a NodeProto>,
    consumers: HashMap<&'a str, Vec<&'a NodeProto>>,
}

impl<'a> GraphIndex<'a> {
    fn new(graph: &'a GraphProto) -> Self {
        let initializers = graph
            .initializer
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let mut producer = HashMap::new();
        let mut consumers: HashMap<&str, Vec<&NodeProto>> = HashMap::new();
        for n in &graph.node {
            for o in &n.output {
                producer.insert(o.as_str(), n);
            }
            for i in &n.input {
                consumers.entry(i.as_str()).or_default().push(n);
            }
        }
        GraphIndex {
            initializers,
            producer,
            consumers,
        }
    }

    /// A constant integer value: an initializer or a `Constant` node's tensor.
    fn const_ints(&self, name: &str) -> Option<Vec<i64>> {
        if let Some(t) = self.initializers.get(name) {
            return tensor_i64(t);
        }
        let node = self.producer.get(name)?;
        if node.op_type != "Constant" {
            return None;
        }
        node.attribute.iter().find_map(|a| match a.name.as_str() {
            "value" => a.t.as_ref().and_then(tensor_i64),
            "value_ints" => Some(a.ints.clone()),
            "value_int" => a.i.map(|v| vec![v]),
            _ => None,
        })
    }

    /// A reshape target as known/unknown entries: constants, or a `Concat` of constants and
    /// single-element runtime values (`Unsqueeze` of a `Gather`ed dimension, as torch writes).
    fn shape_target(&self, name: &str) -> Option<Vec<Option<i64>>> {
        if let Some(v) = self.const_ints(name) {
            return Some(v.into_iter().map(Some).collect());
        }
        let node = self.producer.get(name)?;
        if node.op_type != "Concat" {
            return None;
        }
        let mut out = Vec::new();
        for i in &node.input {
            if let Some(v) = self.const_ints(i) {
                out.extend(v.into_iter().map(Some));
            } else if self
                .producer
                .get(i.as_str())
                .is_some_and(|p| p.op_type == "Unsqueeze")
            {
                out.push(None);
            } else {
                return None;
            }
        }
        Some(out)
    }
}

/// The canonical name of an initializer, also under wrapper prefixes that
/// [`canonical_name`] does not know (sentence-transformers exports use `model.0.auto_model.`,
/// `0.auto_model.`, ...): everything before the first `embeddings.`/`encoder.`/`pooler.`
/// segment is dropped.
pub fn onnx_canonical_name(name: &str) -> Option<String> {
    canonical_name(name).or_else(|| {
        let start = [".embeddings.", ".encoder.", ".pooler."]
            .iter()
            .filter_map(|m| name.find(m))
            .min()?;
        canonical_name(&name[start + 1..])
    })
}

/// The canonical name of a bias initializer, if `name` is one.
fn bias_name(name: &str) -> Option<String> {
    onnx_canonical_name(name).filter(|n| n.ends_with(".bias"))
}

/// Rebuilds canonical BERT weights and the config from a standard BERT export.
///
/// Named initializers (embeddings, layer norms, biases) map by name. `MatMul` weights, which
/// exporters often leave unnamed (`onnx::MatMul_NNN`), are named after the bias added to the
/// `MatMul`'s output (`X.bias` → `X.weight`) and transposed back to `[out, in]`.
/// `num_heads` overrides the head count, which otherwise comes from a 4-element `Reshape`
/// target. The epsilon comes from a `LayerNormalization` node (1e-12 when there is none).
pub fn recover_bert_weights(
    model: &ModelProto,
    num_heads: Option<usize>,
) -> Result<(BertConfig, BertWeights), ModelError> {
    let graph = graph_of(model)?;
    let index = GraphIndex::new(graph);
    let mut tensors: BTreeMap<String, WeightTensor> = BTreeMap::new();
    let mut from_matmul: HashMap<String, String> = HashMap::new(); // canonical → initializer
    let mut used_by_matmul = std::collections::HashSet::new();
    let mut unnamed = Vec::new();

    for node in graph.node.iter().filter(|n| n.op_type == "MatMul") {
        let [_, w_name] = &node.input[..] else {
            continue;
        };
        let Some(w) = index.initializers.get(w_name.as_str()) else {
            continue;
        };
        if w.dims.len() != 2 {
            continue;
        }
        let out = node.output.first().map(String::as_str).unwrap_or_default();
        // Follow the output to the Add whose other operand is a named bias.
        let via_bias = index.consumers.get(out).and_then(|cs| {
            cs.iter().filter(|c| c.op_type == "Add").find_map(|add| {
                add.input
                    .iter()
                    .filter(|i| i.as_str() != out && index.initializers.contains_key(i.as_str()))
                    .find_map(|i| bias_name(i))
            })
        });
        let target = via_bias
            .and_then(|b| b.strip_suffix(".bias").map(|p| format!("{p}.weight")))
            .or_else(|| {
                let n = w_name.strip_suffix(TRANSPOSED_SUFFIX).unwrap_or(w_name);
                onnx_canonical_name(n).filter(|c| c.ends_with(".weight"))
            });
        let Some(target) = target else {
            unnamed.push(w_name.clone());
            continue;
        };
        if let Some(prev) = from_matmul.get(&target) {
            if prev != w_name {
                return Err(recovery(format!(
                    "initializers {prev:?} and {w_name:?} both look like {target}"
                )));
            }
            continue;
        }
        let data = tensor_f32(w)?;
        let shape = w.shape().unwrap_or_default();
        let t = WeightTensor { shape, data }.transposed()?;
        tensors.insert(target.clone(), t);
        from_matmul.insert(target, w_name.clone());
        used_by_matmul.insert(w_name.as_str());
    }

    // Everything else by name; a MatMul-derived weight wins over a same-named initializer.
    for t in &graph.initializer {
        if used_by_matmul.contains(t.name.as_str()) {
            continue;
        }
        let Some(canonical) = onnx_canonical_name(&t.name) else {
            continue;
        };
        if tensors.contains_key(&canonical) {
            continue;
        }
        if !(canonical.starts_with("pooler.") || is_encoder_tensor(&canonical)) {
            continue;
        }
        let data = tensor_f32(t)?;
        let shape = t.shape().unwrap_or_default();
        tensors.insert(canonical, WeightTensor { shape, data });
    }

    let shape_of = |name: &str| -> Result<&[usize], ModelError> {
        tensors
            .get(name)
            .map(|t| t.shape.as_slice())
            .ok_or_else(|| recovery(format!("no initializer for {name}")))
    };
    let [vocab_size, hidden] = *shape_of("embeddings.word_embeddings.weight")? else {
        return Err(recovery("word embeddings are not 2-D"));
    };
    let [max_positions, _] = *shape_of("embeddings.position_embeddings.weight")? else {
        return Err(recovery("position embeddings are not 2-D"));
    };
    let [type_vocab, _] = *shape_of("embeddings.token_type_embeddings.weight")? else {
        return Err(recovery("token-type embeddings are not 2-D"));
    };
    let [intermediate] = *shape_of("encoder.layer.0.intermediate.dense.bias")? else {
        return Err(recovery(
            "encoder.layer.0.intermediate.dense.bias is not 1-D",
        ));
    };
    let layers = tensors
        .keys()
        .filter_map(|k| k.strip_prefix("encoder.layer."))
        .filter_map(|rest| rest.split('.').next()?.parse::<usize>().ok())
        .max()
        .map_or(0, |m| m + 1);

    let heads = match num_heads {
        Some(h) => h,
        None => infer_heads(graph, &index, hidden).ok_or_else(|| {
            recovery(format!(
                "cannot tell the number of attention heads from the graph (hidden size \
                 {hidden}); pass it explicitly (--num-heads)"
            ))
        })?,
    };
    let layer_norm_eps = graph
        .node
        .iter()
        .filter(|n| n.op_type == "LayerNormalization")
        .find_map(|n| n.attribute.iter().find(|a| a.name == "epsilon")?.f)
        // Via the shortest decimal form, so an f32 1e-12 reads back as the f64 1e-12.
        .map_or(1e-12, |e| {
            e.to_string().parse::<f64>().unwrap_or(f64::from(e))
        });

    let config = BertConfig {
        vocab_size,
        hidden_size: hidden,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        intermediate_size: intermediate,
        max_position_embeddings: max_positions,
        type_vocab_size: type_vocab,
        layer_norm_eps,
        architectures: vec!["BertModel".into()],
        ..BertConfig::tiny()
    };
    config.validate()?;
    let weights = BertWeights { tensors };
    if let Err(e) = weights.validate(&config) {
        if !unnamed.is_empty() {
            return Err(recovery(format!(
                "{e}; MatMul weights {unnamed:?} could not be named (no named bias is added \
                 to their output)"
            )));
        }
        return Err(recovery(e.to_string()));
    }
    Ok((config, weights))
}

/// Whether `name` is one of the encoder's tensors (in any layer).
fn is_encoder_tensor(name: &str) -> bool {
    let one_layer = BertConfig {
        num_hidden_layers: 1,
        ..BertConfig::tiny()
    };
    let generic = match name.strip_prefix("encoder.layer.") {
        Some(rest) => match rest.split_once('.') {
            Some((l, tail)) if l.parse::<usize>().is_ok() => format!("encoder.layer.0.{tail}"),
            _ => return false,
        },
        None => name.to_string(),
    };
    required_names(&one_layer).contains(&generic)
}

/// Heads from a `Reshape` to `[batch, seq, heads, head_dim]` (heads may be -1).
fn infer_heads(graph: &GraphProto, index: &GraphIndex<'_>, hidden: usize) -> Option<usize> {
    let hidden = i64::try_from(hidden).ok()?;
    graph
        .node
        .iter()
        .filter(|n| n.op_type == "Reshape")
        .filter_map(|n| index.shape_target(n.input.get(1)?))
        .find_map(|target| {
            let [_, _, Some(h), Some(d)] = target[..] else {
                return None;
            };
            if d <= 0 || hidden % d != 0 {
                return None;
            }
            let heads = hidden / d;
            (h == heads || h == -1 && heads > 1).then_some(heads)
        })
        .and_then(|h| usize::try_from(h).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::onnx_proto::{type_proto, OperatorSetIdProto, TensorShapeProto, TypeProto};
    use crate::model::onnx_writer::{f32_tensor, write_bert_onnx, OUTPUT_NAME};

    fn tiny() -> (BertConfig, BertWeights, ModelProto) {
        let config = BertConfig::tiny();
        let weights = BertWeights::random(&config, 11);
        let bytes = write_bert_onnx(&config, &weights).unwrap();
        let model = decode_model(&bytes).unwrap();
        (config, weights, model)
    }

    #[test]
    fn round_trip_recovers_weights_and_config() {
        let (config, weights, model) = tiny();
        let (c, w) = recover_bert_weights(&model, None).unwrap();
        assert_eq!(c, config);
        assert_eq!(w, weights);
        let (c, _) = recover_bert_weights(&model, Some(4)).unwrap();
        assert_eq!(c.num_attention_heads, 4);
    }

    #[test]
    fn signature_of_written_model() {
        let (_, _, model) = tiny();
        let sig = inspect_signature(&model).unwrap();
        assert_eq!(sig.input_ids.name, "input_ids");
        assert_eq!(sig.input_ids.elem_type, IdType::Int64);
        assert_eq!(sig.attention_mask.name, "attention_mask");
        assert_eq!(sig.token_type_ids.unwrap().name, "token_type_ids");
        assert_eq!(sig.output, OUTPUT_NAME);
        assert_eq!(sig.output_kind, OutputKind::TokenEmbeddings);
        assert_eq!(sig.dimension, Some(32));
    }

    /// Renames every MatMul weight the way torch.onnx does, swaps some Add operands (bias first,
    /// as torch writes them) and turns the head-split Reshape target into a Concat of runtime
    /// dimensions and constants.
    fn torch_like(mut model: ModelProto) -> ModelProto {
        let graph = model.graph.as_mut().unwrap();
        let mut renames = HashMap::new();
        for (n, t) in graph.initializer.iter_mut().enumerate() {
            if t.name.ends_with(".weight.T") {
                let new = format!("onnx::MatMul_{}", 400 + n);
                renames.insert(t.name.clone(), new.clone());
                t.name = new;
            }
        }
        for (k, node) in graph.node.iter_mut().enumerate() {
            for i in node.input.iter_mut() {
                if let Some(new) = renames.get(i) {
                    *i = new.clone();
                }
            }
            if node.op_type == "Add" && k % 2 == 0 {
                node.input.reverse();
            }
        }
        // Reshape target [0, 0, 4, 8] → Concat(Unsqueeze(b), Unsqueeze(s), [4], [8]).
        graph
            .initializer
            .retain(|t| t.name != "const.split_heads_shape");
        let dyn_dim = |name: &str| NodeProto {
            input: vec!["input_ids".into(), "const.axis0".into()],
            output: vec![name.into()],
            op_type: "Unsqueeze".into(),
            ..Default::default()
        };
        let constant = |name: &str, v: i64| NodeProto {
            output: vec![name.into()],
            op_type: "Constant".into(),
            attribute: vec![crate::model::onnx_proto::AttributeProto {
                name: "value".into(),
                t: Some(crate::model::onnx_writer::i64_tensor("", &[1], &[v])),
                r#type: 4,
                ..Default::default()
            }],
            ..Default::default()
        };
        let concat = NodeProto {
            input: vec!["u0".into(), "u1".into(), "c_heads".into(), "c_dim".into()],
            output: vec!["const.split_heads_shape".into()],
            op_type: "Concat".into(),
            ..Default::default()
        };
        let mut nodes = vec![
            dyn_dim("u0"),
            dyn_dim("u1"),
            constant("c_heads", 4),
            constant("c_dim", 8),
            concat,
        ];
        nodes.append(&mut graph.node);
        graph.node = nodes;
        model
    }

    #[test]
    fn recovers_unnamed_matmul_weights_and_heads_from_concat() {
        let (config, weights, model) = tiny();
        let model = torch_like(model);
        let graph = model.graph.as_ref().unwrap();
        assert!(graph
            .initializer
            .iter()
            .any(|t| t.name.starts_with("onnx::MatMul_")));
        assert!(graph.initializer.iter().all(|t| !t.name.ends_with(".T")));
        let (c, w) = recover_bert_weights(&model, None).unwrap();
        assert_eq!(c, config);
        assert_eq!(w, weights);
    }

    #[test]
    fn missing_heads_asks_for_num_heads() {
        let (_, weights, mut model) = tiny();
        let graph = model.graph.as_mut().unwrap();
        graph.node.retain(|n| n.op_type != "Reshape");
        let err = recover_bert_weights(&model, None).unwrap_err().to_string();
        assert!(err.contains("--num-heads"), "{err}");
        let (_, w) = recover_bert_weights(&model, Some(4)).unwrap();
        assert_eq!(w, weights);
    }

    #[test]
    fn unnamed_bias_says_which_weights_are_unnamed() {
        let (_, _, mut model) = tiny();
        let graph = model.graph.as_mut().unwrap();
        for t in graph.initializer.iter_mut() {
            if t.name == "encoder.layer.0.attention.self.query.weight.T" {
                t.name = "onnx::MatMul_1".into();
            }
            if t.name == "encoder.layer.0.attention.self.query.bias" {
                t.name = "onnx::Add_2".into();
            }
        }
        for n in graph.node.iter_mut() {
            for i in n.input.iter_mut() {
                if i == "encoder.layer.0.attention.self.query.weight.T" {
                    *i = "onnx::MatMul_1".into();
                }
                if i == "encoder.layer.0.attention.self.query.bias" {
                    *i = "onnx::Add_2".into();
                }
            }
        }
        let err = recover_bert_weights(&model, None).unwrap_err().to_string();
        assert!(err.contains("onnx::MatMul_1"), "{err}");
    }

    #[test]
    fn quantised_weights_are_refused_with_reason() {
        let (_, _, mut model) = tiny();
        let graph = model.graph.as_mut().unwrap();
        let t = graph
            .initializer
            .iter_mut()
            .find(|t| t.name == "encoder.layer.0.intermediate.dense.weight.T")
            .unwrap();
        t.data_type = DataType::Int8 as i32;
        t.raw_data.truncate(t.raw_data.len() / 4);
        let err = recover_bert_weights(&model, None).unwrap_err().to_string();
        assert!(err.contains("int8"), "{err}");
    }

    #[test]
    fn wrapper_prefixes_of_sentence_transformers_exports() {
        assert_eq!(
            onnx_canonical_name("model.0.auto_model.encoder.layer.2.output.dense.bias").as_deref(),
            Some("encoder.layer.2.output.dense.bias")
        );
        assert_eq!(
            onnx_canonical_name("0.auto_model.embeddings.LayerNorm.weight").as_deref(),
            Some("embeddings.LayerNorm.weight")
        );
        assert_eq!(onnx_canonical_name("onnx::MatMul_470"), None);
        assert_eq!(onnx_canonical_name("const.one"), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_model(b"").is_err());
        assert!(decode_model(b"definitely not onnx").is_err());
        assert!(decode_model(&[0xff; 64]).is_err());
        assert!(decode_model(&[0x08, 0x08]).is_err()); // ir_version only, no graph
        let (_, _, model) = tiny();
        let bytes = model.encode_to_vec();
        assert!(decode_model(&bytes[..bytes.len() / 2]).is_err());
        let empty = ModelProto::default();
        assert!(inspect_signature(&empty).is_err());
        assert!(recover_bert_weights(&empty, None).is_err());
    }

    #[test]
    fn corrupted_models_never_panic() {
        let config = BertConfig {
            vocab_size: 16,
            hidden_size: 8,
            num_attention_heads: 2,
            intermediate_size: 16,
            num_hidden_layers: 1,
            max_position_embeddings: 8,
            ..BertConfig::tiny()
        };
        let bytes = write_bert_onnx(&config, &BertWeights::random(&config, 5)).unwrap();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for round in 0..300 {
            let mut b = bytes.clone();
            for _ in 0..1 + round % 8 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = (state % b.len() as u64) as usize;
                b[at] = (state >> 32) as u8;
            }
            if round % 10 == 0 {
                b.truncate((state % b.len() as u64) as usize);
            }
            if let Ok(m) = decode_model(&b) {
                let _ = inspect_signature(&m);
                let _ = recover_bert_weights(&m, None);
                let _ = recover_bert_weights(&m, Some(3));
            }
        }
    }

    #[test]
    fn signature_errors_name_the_problem() {
        let (_, _, model) = tiny();
        let mut no_mask = model.clone();
        no_mask
            .graph
            .as_mut()
            .unwrap()
            .input
            .retain(|i| i.name != "attention_mask");
        let err = inspect_signature(&no_mask).unwrap_err().to_string();
        assert!(err.contains("attention"), "{err}");

        let mut extra = model.clone();
        let mut pos = extra.graph.as_ref().unwrap().input[0].clone();
        pos.name = "position_ids".into();
        extra.graph.as_mut().unwrap().input.push(pos);
        let err = inspect_signature(&extra).unwrap_err().to_string();
        assert!(err.contains("position_ids"), "{err}");

        let mut float_ids = model.clone();
        if let Some(TypeProto {
            value: Some(type_proto::Value::TensorType(t)),
            ..
        }) = float_ids.graph.as_mut().unwrap().input[0].r#type.as_mut()
        {
            t.elem_type = DataType::Float as i32;
        }
        let err = inspect_signature(&float_ids).unwrap_err().to_string();
        assert!(err.contains("input_ids") && err.contains("float"), "{err}");

        let mut no_out = model.clone();
        no_out.graph.as_mut().unwrap().output.clear();
        let err = inspect_signature(&no_out).unwrap_err().to_string();
        assert!(err.contains("no usable output"), "{err}");
    }

    #[test]
    fn output_preference_and_pooled_kinds() {
        let vi = |name: &str, elem: DataType, rank: usize| ValueInfoProto {
            name: name.into(),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: elem as i32,
                    shape: Some(TensorShapeProto {
                        dim: (0..rank)
                            .map(
                                |_| crate::model::onnx_proto::tensor_shape_proto::Dimension {
                                    value: Some(dimension::Value::DimValue(8)),
                                    denotation: String::new(),
                                },
                            )
                            .collect(),
                    }),
                })),
                denotation: String::new(),
            }),
            doc_string: String::new(),
        };
        let (_, _, base) = tiny();
        let with_outputs = |outs: Vec<ValueInfoProto>| {
            let mut m = base.clone();
            m.graph.as_mut().unwrap().output = outs;
            inspect_signature(&m).unwrap()
        };
        // The torch export of paraphrase-MiniLM-L3-v2: ids passthrough, pooled and token outputs.
        let s = with_outputs(vec![
            vi("output", DataType::Int64, 2),
            vi("461", DataType::Float, 2),
            vi("onnx::Shape_422", DataType::Float, 3),
        ]);
        assert_eq!(
            (s.output.as_str(), s.output_kind),
            ("onnx::Shape_422", OutputKind::TokenEmbeddings)
        );
        let s = with_outputs(vec![
            vi("other", DataType::Float, 3),
            vi("token_embeddings", DataType::Float, 3),
            vi("sentence_embedding", DataType::Float, 2),
        ]);
        assert_eq!(s.output, "token_embeddings");
        let s = with_outputs(vec![vi("sentence_embedding", DataType::Float, 2)]);
        assert_eq!(s.output_kind, OutputKind::SentenceEmbedding);
        let s = with_outputs(vec![vi("pooler_output", DataType::Float, 2)]);
        assert_eq!(s.output_kind, OutputKind::PoolerOutput);
    }

    #[test]
    fn model_without_bert_tensors_is_refused() {
        let model = ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            }],
            graph: Some(GraphProto {
                node: vec![NodeProto {
                    input: vec!["x".into(), "w".into()],
                    output: vec!["y".into()],
                    op_type: "MatMul".into(),
                    ..Default::default()
                }],
                initializer: vec![f32_tensor("w", &[2, 2], &[1.0, 2.0, 3.0, 4.0])],
                ..Default::default()
            }),
            ..Default::default()
        };
        let bytes = model.encode_to_vec();
        let model = decode_model(&bytes).unwrap();
        let err = recover_bert_weights(&model, None).unwrap_err().to_string();
        assert!(err.contains("word_embeddings"), "{err}");
    }
}
