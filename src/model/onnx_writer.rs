//! Writes a BERT encoder (Hugging Face `BertModel`, eval mode, no pooler) as an ONNX graph.
//!
//! The graph is what ONNX Runtime serves for every encoder capot makes: the weights come from
//! safetensors (a downloaded model or an alignment job), the graph is opset 17 with standard
//! operators only. Pooling and normalisation are left to the caller.
//!
//! Inputs: `input_ids`, `attention_mask`, `token_type_ids` (int64 `[batch, sequence]`).
//! Output: `last_hidden_state` (float `[batch, sequence, hidden]`).
//!
//! Initializer names: embeddings, layer norms and biases keep their canonical `BertModel` name
//! (`encoder.layer.0.attention.self.query.bias`); linear weights are stored transposed to
//! `[in, out]` for `MatMul` under `<canonical>.T` (`encoder.layer.0.attention.self.query.weight.T`);
//! graph constants are named `const.*`. All tensors are little-endian f32/i64 `raw_data`.
//!
//! With [`LinearPrecision::Int8`] every linear layer's weight is stored as int8 with one scale
//! per output column (`<canonical>.T.int8`, `.T.scale`, `.T.zero_point`) and multiplied by the
//! dynamically quantised activations: `DynamicQuantizeLinear` → `MatMulInteger` → `Cast` → `Mul`,
//! the pattern ONNX Runtime's dynamic quantisation writes and fuses into one int8 kernel.
//! Embeddings, layer norms, attention scores and biases stay float32.

use prost::Message;

use super::onnx_proto::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto, type_proto,
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use super::{BertConfig, BertWeights, ModelError, WeightTensor};

/// ONNX IR version written (ONNX 1.13+, ONNX Runtime 1.14+).
pub const IR_VERSION: i64 = 8;
/// Default-domain opset written (first with `LayerNormalization`).
pub const OPSET: i64 = 17;
/// Graph input names, in order.
pub const INPUT_NAMES: [&str; 3] = ["input_ids", "attention_mask", "token_type_ids"];
/// Graph output name.
pub const OUTPUT_NAME: &str = "last_hidden_state";
/// Suffix of transposed (`[in, out]`) linear-weight initializers.
pub const TRANSPOSED_SUFFIX: &str = ".T";

/// Added to attention scores of padded positions; the value Hugging Face uses
/// (`torch.finfo(float32).min`), so padded keys get exactly zero probability.
const MASK_NEGATIVE: f32 = f32::MIN;

/// How the linear layers (attention projections, feed-forward) are stored and multiplied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinearPrecision {
    /// Float32 weights and `MatMul`, as trained.
    #[default]
    Float32,
    /// Dynamic int8: weights symmetric int8 per output column, activations quantised to uint8
    /// per call. `reduce_range` keeps weights in 7 bits (±63), which avoids the int16 overflow of
    /// the uint8×int8 kernels of x86 CPUs without VNNI at a small cost in precision.
    Int8 { reduce_range: bool },
}

impl LinearPrecision {
    /// The name recorded in manifests and printed by the CLI (`float32`, `int8`, `int8-7bit`).
    pub fn name(self) -> &'static str {
        match self {
            LinearPrecision::Float32 => "float32",
            LinearPrecision::Int8 {
                reduce_range: false,
            } => "int8",
            LinearPrecision::Int8 { reduce_range: true } => "int8-7bit",
        }
    }
}

/// Serializes `weights` under `config` as an ONNX `ModelProto` (ir 8, opset 17, producer "capot")
/// with float32 linear layers.
///
/// The weights are validated against `config` first, so a mismatch is an error here rather
/// than a broken graph at load time.
pub fn write_bert_onnx(config: &BertConfig, weights: &BertWeights) -> Result<Vec<u8>, ModelError> {
    write_bert_onnx_with(config, weights, LinearPrecision::Float32)
}

/// As [`write_bert_onnx`], with the linear layers at `precision`.
pub fn write_bert_onnx_with(
    config: &BertConfig,
    weights: &BertWeights,
    precision: LinearPrecision,
) -> Result<Vec<u8>, ModelError> {
    config.validate()?;
    weights.validate(config)?;
    for (name, t) in &weights.tensors {
        if t.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(t.data.len()) {
            return Err(ModelError::Shape(format!(
                "{name}: shape {:?} does not match its {} values",
                t.shape,
                t.data.len()
            )));
        }
    }
    let graph = build_graph(config, weights, precision)?;
    let meta = |k: &str, v: String| StringStringEntryProto {
        key: k.to_string(),
        value: v,
    };
    let model = ModelProto {
        ir_version: IR_VERSION,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: OPSET,
        }],
        producer_name: "capot".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        doc_string: "BERT encoder (Hugging Face BertModel, eval mode) written by capot".into(),
        graph: Some(graph),
        metadata_props: vec![
            meta("capot.model_type", config.model_type.clone()),
            meta("capot.hidden_size", config.hidden_size.to_string()),
            meta(
                "capot.num_attention_heads",
                config.num_attention_heads.to_string(),
            ),
            meta(
                "capot.num_hidden_layers",
                config.num_hidden_layers.to_string(),
            ),
            meta(
                "capot.intermediate_size",
                config.intermediate_size.to_string(),
            ),
            meta("capot.layer_norm_eps", config.layer_norm_eps.to_string()),
            meta("capot.output", OUTPUT_NAME.to_string()),
            meta("capot.linear_precision", precision.name().to_string()),
        ],
        ..Default::default()
    };
    Ok(model.encode_to_vec())
}

/// Collects nodes and initializers with unique, readable value names.
struct GraphBuilder {
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    precision: LinearPrecision,
}

fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i: Some(v),
        r#type: AttributeType::Int as i32,
        ..Default::default()
    }
}

fn attr_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        f: Some(v),
        r#type: AttributeType::Float as i32,
        ..Default::default()
    }
}

fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        ints: v.to_vec(),
        r#type: AttributeType::Ints as i32,
        ..Default::default()
    }
}

/// An f32 tensor as little-endian `raw_data`.
pub(crate) fn f32_tensor(name: &str, shape: &[usize], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: shape.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Float as i32,
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// An int8 tensor as `raw_data`.
fn i8_tensor(name: &str, shape: &[usize], data: &[i8]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: shape.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Int8 as i32,
        raw_data: data.iter().map(|&v| v as u8).collect(),
        ..Default::default()
    }
}

/// Symmetric per-column int8 quantisation of a row-major `[rows, cols]` matrix: `q[r][c] =
/// round(w[r][c] / scale[c])` clamped to ±`max_q`, with `scale[c] = max_r |w[r][c]| / max_q`
/// (1 for an all-zero column, so that dequantisation stays exact).
pub(crate) fn quantize_columns(w: &WeightTensor, max_q: i8) -> (Vec<i8>, Vec<f32>) {
    let cols = w.shape.get(1).copied().unwrap_or(1).max(1);
    let mut scale = vec![0f32; cols];
    for row in w.data.chunks(cols) {
        for (s, v) in scale.iter_mut().zip(row) {
            *s = s.max(v.abs());
        }
    }
    for s in &mut scale {
        *s = if *s > 0.0 { *s / f32::from(max_q) } else { 1.0 };
    }
    let q = w
        .data
        .chunks(cols)
        .flat_map(|row| {
            row.iter()
                .zip(&scale)
                .map(|(v, s)| (v / s).round().clamp(-f32::from(max_q), f32::from(max_q)) as i8)
        })
        .collect();
    (q, scale)
}

/// An i64 tensor as little-endian `raw_data`.
pub(crate) fn i64_tensor(name: &str, shape: &[usize], data: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: shape.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Int64 as i32,
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

fn tensor_value_info(name: &str, elem: DataType, dims: &[Result<i64, &str>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| tensor_shape_proto::Dimension {
            value: Some(match d {
                Ok(v) => tensor_shape_proto::dimension::Value::DimValue(*v),
                Err(p) => tensor_shape_proto::dimension::Value::DimParam((*p).to_string()),
            }),
            denotation: String::new(),
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem as i32,
                shape: Some(TensorShapeProto { dim }),
            })),
            denotation: String::new(),
        }),
        doc_string: String::new(),
    }
}

impl GraphBuilder {
    /// Adds a node whose single output is named `out`; returns `out`.
    fn node(&mut self, op: &str, inputs: &[&str], out: &str, attrs: Vec<AttributeProto>) -> String {
        self.node_outputs(op, inputs, &[out], attrs);
        out.to_string()
    }

    /// Adds a node with several outputs.
    fn node_outputs(
        &mut self,
        op: &str,
        inputs: &[&str],
        outs: &[&str],
        attrs: Vec<AttributeProto>,
    ) {
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outs.iter().map(|s| s.to_string()).collect(),
            name: format!("{}/{op}", outs[0]),
            op_type: op.into(),
            attribute: attrs,
            ..Default::default()
        });
    }

    fn init(&mut self, t: TensorProto) -> String {
        let name = t.name.clone();
        self.initializers.push(t);
        name
    }

    /// Adds a canonical tensor under its own name.
    fn weight(&mut self, weights: &BertWeights, name: &str) -> Result<String, ModelError> {
        let t = weights.get(name)?;
        Ok(self.init(f32_tensor(name, &t.shape, &t.data)))
    }

    /// `x @ W^T + b` for the canonical linear layer `prefix` (`prefix.weight`, `prefix.bias`).
    fn linear(
        &mut self,
        weights: &BertWeights,
        x: &str,
        prefix: &str,
    ) -> Result<String, ModelError> {
        let w: WeightTensor = weights.get(&format!("{prefix}.weight"))?.transposed()?;
        let w_name = format!("{prefix}.weight{TRANSPOSED_SUFFIX}");
        let b_name = self.weight(weights, &format!("{prefix}.bias"))?;
        let mm = match self.precision {
            LinearPrecision::Float32 => {
                self.init(f32_tensor(&w_name, &w.shape, &w.data));
                self.node("MatMul", &[x, &w_name], &format!("{prefix}/matmul"), vec![])
            }
            LinearPrecision::Int8 { reduce_range } => {
                let (q, scale) = quantize_columns(&w, if reduce_range { 63 } else { 127 });
                let q_name = self.init(i8_tensor(&format!("{w_name}.int8"), &w.shape, &q));
                let s_name = self.init(f32_tensor(
                    &format!("{w_name}.scale"),
                    &[scale.len()],
                    &scale,
                ));
                let zeros = vec![0i8; scale.len()];
                let z_name = self.init(i8_tensor(
                    &format!("{w_name}.zero_point"),
                    &[zeros.len()],
                    &zeros,
                ));
                let [xq, xs, xz] = ["quantized", "scale", "zero_point"]
                    .map(|part| format!("{prefix}/input_{part}"));
                self.node_outputs("DynamicQuantizeLinear", &[x], &[&xq, &xs, &xz], vec![]);
                let scale = self.node("Mul", &[&xs, &s_name], &format!("{prefix}/scale"), vec![]);
                let acc = self.node(
                    "MatMulInteger",
                    &[&xq, &q_name, &xz, &z_name],
                    &format!("{prefix}/matmul_integer"),
                    vec![],
                );
                let acc = self.node(
                    "Cast",
                    &[&acc],
                    &format!("{prefix}/matmul_float"),
                    vec![attr_int("to", DataType::Float as i64)],
                );
                self.node("Mul", &[&acc, &scale], &format!("{prefix}/matmul"), vec![])
            }
        };
        Ok(self.node("Add", &[&mm, &b_name], &format!("{prefix}/out"), vec![]))
    }

    fn layer_norm(
        &mut self,
        weights: &BertWeights,
        x: &str,
        prefix: &str,
        eps: f32,
        out: Option<&str>,
    ) -> Result<String, ModelError> {
        let g = self.weight(weights, &format!("{prefix}.weight"))?;
        let b = self.weight(weights, &format!("{prefix}.bias"))?;
        let default_out = format!("{prefix}/out");
        Ok(self.node(
            "LayerNormalization",
            &[x, &g, &b],
            out.unwrap_or(&default_out),
            vec![attr_int("axis", -1), attr_float("epsilon", eps)],
        ))
    }
}

fn build_graph(
    config: &BertConfig,
    weights: &BertWeights,
    precision: LinearPrecision,
) -> Result<GraphProto, ModelError> {
    let hidden = config.hidden_size;
    let heads = config.num_attention_heads;
    let head_dim = config.head_dim();
    let eps = config.layer_norm_eps as f32;
    let mut g = GraphBuilder {
        nodes: Vec::new(),
        initializers: Vec::new(),
        precision,
    };
    let [ids, mask, types] = INPUT_NAMES;

    // Constants.
    let c_zero = g.init(i64_tensor("const.zero_1d", &[1], &[0]));
    let c_split = g.init(i64_tensor(
        "const.split_heads_shape",
        &[4],
        &[0, 0, heads as i64, head_dim as i64],
    ));
    let c_merge = g.init(i64_tensor(
        "const.merge_heads_shape",
        &[3],
        &[0, 0, hidden as i64],
    ));
    let c_mask_axes = g.init(i64_tensor("const.mask_unsqueeze_axes", &[2], &[1, 2]));
    let c_one = g.init(f32_tensor("const.one", &[], &[1.0]));
    let c_neg = g.init(f32_tensor("const.mask_negative", &[], &[MASK_NEGATIVE]));
    let c_scale = g.init(f32_tensor(
        "const.sqrt_head_dim",
        &[],
        &[(head_dim as f32).sqrt()],
    ));
    let c_sqrt2 = g.init(f32_tensor("const.sqrt2", &[], &[std::f32::consts::SQRT_2]));
    let c_half = g.init(f32_tensor("const.half", &[], &[0.5]));

    // Embeddings: word + token type, then + position (Hugging Face's order), then LayerNorm.
    let word_w = g.weight(weights, "embeddings.word_embeddings.weight")?;
    let type_w = g.weight(weights, "embeddings.token_type_embeddings.weight")?;
    let pos_w = g.weight(weights, "embeddings.position_embeddings.weight")?;
    let word = g.node("Gather", &[&word_w, ids], "embeddings/word", vec![]);
    let tt = g.node("Gather", &[&type_w, types], "embeddings/token_type", vec![]);
    let seq_len = g.node(
        "Shape",
        &[ids],
        "embeddings/seq_len",
        vec![attr_int("start", 1), attr_int("end", 2)],
    );
    // Rows 0..S of the position table: [S, hidden], broadcast over the batch.
    let pos = g.node(
        "Slice",
        &[&pos_w, &c_zero, &seq_len, &c_zero],
        "embeddings/position",
        vec![],
    );
    let sum = g.node("Add", &[&word, &tt], "embeddings/word_plus_type", vec![]);
    let sum = g.node("Add", &[&sum, &pos], "embeddings/sum", vec![]);
    let mut x = g.layer_norm(weights, &sum, "embeddings.LayerNorm", eps, None)?;

    // Additive attention mask [B, 1, 1, S]: 0 where attended, float min where padded.
    let mask_f = g.node(
        "Cast",
        &[mask],
        "mask/float",
        vec![attr_int("to", DataType::Float as i64)],
    );
    let inv = g.node("Sub", &[&c_one, &mask_f], "mask/inverted", vec![]);
    let neg = g.node("Mul", &[&inv, &c_neg], "mask/additive", vec![]);
    let ext_mask = g.node("Unsqueeze", &[&neg, &c_mask_axes], "mask/extended", vec![]);

    for l in 0..config.num_hidden_layers {
        let p = format!("encoder.layer.{l}");
        let last = l + 1 == config.num_hidden_layers;
        let q = g.linear(weights, &x, &format!("{p}.attention.self.query"))?;
        let k = g.linear(weights, &x, &format!("{p}.attention.self.key"))?;
        let v = g.linear(weights, &x, &format!("{p}.attention.self.value"))?;
        let split = |g: &mut GraphBuilder, t: &str, name: &str, perm: &[i64]| {
            let r = g.node(
                "Reshape",
                &[t, &c_split],
                &format!("{p}.attention.self/{name}_split"),
                vec![],
            );
            g.node(
                "Transpose",
                &[&r],
                &format!("{p}.attention.self/{name}_heads"),
                vec![attr_ints("perm", perm)],
            )
        };
        let qh = split(&mut g, &q, "query", &[0, 2, 1, 3]); // [B, h, S, d]
        let kt = split(&mut g, &k, "key", &[0, 2, 3, 1]); // [B, h, d, S]
        let vh = split(&mut g, &v, "value", &[0, 2, 1, 3]); // [B, h, S, d]
        let a = format!("{p}.attention.self");
        let scores = g.node("MatMul", &[&qh, &kt], &format!("{a}/scores"), vec![]);
        let scaled = g.node("Div", &[&scores, &c_scale], &format!("{a}/scaled"), vec![]);
        let masked = g.node("Add", &[&scaled, &ext_mask], &format!("{a}/masked"), vec![]);
        let probs = g.node(
            "Softmax",
            &[&masked],
            &format!("{a}/probs"),
            vec![attr_int("axis", -1)],
        );
        let ctx = g.node("MatMul", &[&probs, &vh], &format!("{a}/context"), vec![]);
        let ctx = g.node(
            "Transpose",
            &[&ctx],
            &format!("{a}/context_t"),
            vec![attr_ints("perm", &[0, 2, 1, 3])],
        );
        let ctx = g.node(
            "Reshape",
            &[&ctx, &c_merge],
            &format!("{a}/context_merged"),
            vec![],
        );

        let o = g.linear(weights, &ctx, &format!("{p}.attention.output.dense"))?;
        let res = g.node(
            "Add",
            &[&o, &x],
            &format!("{p}.attention.output/residual"),
            vec![],
        );
        let h1 = g.layer_norm(
            weights,
            &res,
            &format!("{p}.attention.output.LayerNorm"),
            eps,
            None,
        )?;

        // Exact GELU: x * 0.5 * (1 + erf(x / sqrt(2))).
        let i = g.linear(weights, &h1, &format!("{p}.intermediate.dense"))?;
        let ip = format!("{p}.intermediate/gelu");
        let d = g.node("Div", &[&i, &c_sqrt2], &format!("{ip}/div"), vec![]);
        let e = g.node("Erf", &[&d], &format!("{ip}/erf"), vec![]);
        let e1 = g.node("Add", &[&e, &c_one], &format!("{ip}/one_plus"), vec![]);
        let xm = g.node("Mul", &[&i, &c_half], &format!("{ip}/half_x"), vec![]);
        let act = g.node("Mul", &[&xm, &e1], &format!("{ip}/out"), vec![]);

        let o2 = g.linear(weights, &act, &format!("{p}.output.dense"))?;
        let res2 = g.node("Add", &[&o2, &h1], &format!("{p}.output/residual"), vec![]);
        x = g.layer_norm(
            weights,
            &res2,
            &format!("{p}.output.LayerNorm"),
            eps,
            last.then_some(OUTPUT_NAME),
        )?;
    }

    let bs: [Result<i64, &str>; 2] = [Err("batch"), Err("sequence")];
    Ok(GraphProto {
        node: g.nodes,
        name: "capot_bert".into(),
        initializer: g.initializers,
        input: INPUT_NAMES
            .iter()
            .map(|n| tensor_value_info(n, DataType::Int64, &bs))
            .collect(),
        output: vec![tensor_value_info(
            OUTPUT_NAME,
            DataType::Float,
            &[Err("batch"), Err("sequence"), Ok(hidden as i64)],
        )],
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::onnx_proto::ModelProto;

    /// Every node input is a graph input, an initializer or an earlier node's output, and the
    /// graph output is produced.
    fn assert_well_formed(graph: &GraphProto) {
        let mut known: std::collections::HashSet<String> = graph
            .initializer
            .iter()
            .map(|t| t.name.clone())
            .chain(graph.input.iter().map(|i| i.name.clone()))
            .collect();
        for n in &graph.node {
            for i in &n.input {
                assert!(known.contains(i), "{} uses undefined {i}", n.name);
            }
            known.extend(n.output.iter().cloned());
        }
        assert!(known.contains(OUTPUT_NAME));
    }

    #[test]
    fn tiny_model_writes_and_decodes() {
        let config = BertConfig::tiny();
        let weights = BertWeights::random(&config, 3);
        let bytes = write_bert_onnx(&config, &weights).unwrap();
        let model = ModelProto::decode(bytes.as_slice()).unwrap();
        assert_eq!(model.ir_version, IR_VERSION);
        assert_eq!(model.opset_import[0].version, OPSET);
        assert_eq!(model.producer_name, "capot");
        let graph = model.graph.unwrap();
        let inputs: Vec<_> = graph.input.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(inputs, INPUT_NAMES);
        assert_eq!(graph.output[0].name, OUTPUT_NAME);
        assert_well_formed(&graph);
        let q = graph
            .initializer
            .iter()
            .find(|t| t.name == "encoder.layer.0.attention.self.query.weight.T")
            .unwrap();
        assert_eq!(q.dims, vec![32, 32]);
        let inter = graph
            .initializer
            .iter()
            .find(|t| t.name == "encoder.layer.1.intermediate.dense.weight.T")
            .unwrap();
        assert_eq!(inter.dims, vec![32, 64]);
        assert!(model
            .metadata_props
            .iter()
            .any(|p| p.key == "capot.num_attention_heads" && p.value == "4"));
    }

    #[test]
    fn columns_quantize_within_half_a_step() {
        let w = WeightTensor::new(
            vec![3, 3],
            vec![0.5, -2.0, 0.0, -1.0, 1.0, 0.0, 0.25, 0.1, 0.0],
        );
        let (q, scale) = quantize_columns(&w, 127);
        assert_eq!(scale, vec![1.0 / 127.0, 2.0 / 127.0, 1.0]);
        // The largest magnitude of each column maps to ±127; an all-zero column stays zero.
        assert_eq!((q[3], q[1], q[2]), (-127, -127, 0));
        for (i, (&v, &qi)) in w.data.iter().zip(&q).enumerate() {
            let s = scale[i % 3];
            assert!((v - f32::from(qi) * s).abs() <= s / 2.0 + 1e-7, "{i}");
        }
        let (q7, _) = quantize_columns(&w, 63);
        assert!(q7.iter().all(|v| (-63..=63).contains(v)));
    }

    #[test]
    fn int8_graph_is_well_formed() {
        let config = BertConfig::tiny();
        let weights = BertWeights::random(&config, 3);
        let precision = LinearPrecision::Int8 {
            reduce_range: false,
        };
        let bytes = write_bert_onnx_with(&config, &weights, precision).unwrap();
        let model = ModelProto::decode(bytes.as_slice()).unwrap();
        assert!(model
            .metadata_props
            .iter()
            .any(|p| p.key == "capot.linear_precision" && p.value == "int8"));
        let graph = model.graph.unwrap();
        assert_well_formed(&graph);
        let q = graph
            .initializer
            .iter()
            .find(|t| t.name == "encoder.layer.0.attention.self.query.weight.T.int8")
            .unwrap();
        assert_eq!(q.data_type, DataType::Int8 as i32);
        assert_eq!((q.dims.clone(), q.raw_data.len()), (vec![32, 32], 32 * 32));
    }

    #[test]
    fn mismatched_weights_are_rejected() {
        let config = BertConfig::tiny();
        let mut weights = BertWeights::random(&config, 3);
        weights
            .tensors
            .remove("encoder.layer.0.output.dense.weight");
        let err = write_bert_onnx(&config, &weights).unwrap_err().to_string();
        assert!(err.contains("encoder.layer.0.output.dense.weight"), "{err}");
    }
}
