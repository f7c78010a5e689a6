//! Validation before training, the anchor cache, and the training loop.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use candle_core::{Device, Tensor, Var};
use candle_nn::VarMap;
use serde::Serialize;

use super::checkpoint::{self, CheckpointMeta};
use super::data::{self, Plan, QueryData};
use super::objective::{self, BatchVectors, RankingTargets};
use super::optim::AdamW;
use super::{bundle, AlignError, AlignOptions, AlignProgress, TrainDevice};
use crate::encoder::manifest::{self, EncoderManifest, Pooling};
use crate::encoder::TextTokenizer;
use crate::index::Index;
use crate::model::bert::{cls_pool, l2_normalize, mean_pool, trainable_vars};
use crate::model::{BertConfig, BertModel, BertWeights};

/// One finished step, as drawn by the progress bar and stored in the training curve.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct StepRecord {
    /// 1-based step number.
    pub step: usize,
    /// Total steps of the run.
    pub total_steps: usize,
    /// Epoch of the batch (0-based).
    pub epoch: usize,
    /// Total loss (weighted mix).
    pub loss: f32,
    /// Named loss parts.
    pub parts: BTreeMap<String, f32>,
    /// (clean, noisy) pairs in the step.
    pub pairs: usize,
    /// Padded sequence length of the student forward pass.
    pub sequence: usize,
    /// Wall time of the step in seconds.
    pub seconds: f64,
    /// Of which: tokenization, forward pass and loss.
    #[serde(default)]
    pub forward_seconds: f64,
    /// Of which: backward pass.
    #[serde(default)]
    pub backward_seconds: f64,
    /// Of which: optimiser update.
    #[serde(default)]
    pub update_seconds: f64,
    /// Learning rate of the step's update (after warm-up and decay).
    #[serde(default)]
    pub lr: f64,
}

/// What the run produced.
#[derive(Debug)]
pub enum AlignOutcome {
    /// Training finished and the bundle was written.
    Finished(Box<AlignReport>),
    /// Stopped at a step boundary by the stop flag; the checkpoint is consistent.
    Interrupted {
        /// Steps completed.
        step: usize,
        /// Total steps planned.
        total_steps: usize,
        /// Where the checkpoint was written.
        checkpoint: std::path::PathBuf,
    },
}

/// Summary of a finished run.
#[derive(Debug, Clone, Serialize)]
pub struct AlignReport {
    /// The written bundle's manifest.
    pub manifest: EncoderManifest,
    /// Steps trained (over all sessions of a resumed run).
    pub steps: usize,
    /// Steps trained in this session.
    pub session_steps: usize,
    /// Mean of the last steps' losses (up to 10).
    pub final_losses: BTreeMap<String, f32>,
    /// Training pairs per second in this session (anchor precomputation excluded).
    pub pairs_per_second: f64,
    /// Seconds spent computing anchor vectors.
    pub anchor_seconds: f64,
    /// Seconds of training in this session.
    pub train_seconds: f64,
    /// Wall time of this session, bundle writing included.
    pub wall_seconds: f64,
}

/// A validated run, ready to train.
pub struct Prepared {
    pub(crate) options: AlignOptions,
    pub(crate) base_manifest: EncoderManifest,
    pub(crate) config: BertConfig,
    pub(crate) weights: BertWeights,
    pub(crate) weights_sha256: String,
    pub(crate) tokenizer: TextTokenizer,
    pub(crate) data: QueryData,
    pub(crate) plan: Plan,
    pub(crate) index: Option<Index>,
    pub(crate) device: Device,
    pub(crate) resume_from: Option<(std::path::PathBuf, CheckpointMeta)>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("base", &self.options.base)
            .field("steps", &self.plan.steps.len())
            .finish_non_exhaustive()
    }
}

fn input(msg: String) -> AlignError {
    AlignError::Input(msg)
}

/// Checks every input and loads what training needs; nothing is trained or written here.
pub fn prepare(options: &AlignOptions) -> Result<Prepared, AlignError> {
    let o = options;
    o.loss.validate()?;
    if o.batch_size < 2 {
        return Err(input(format!(
            "--batch-size must be at least 2 (negatives come from the batch), got {}",
            o.batch_size
        )));
    }
    if o.positives == 0 {
        return Err(input("--positives must be at least 1".into()));
    }
    if !(o.adamw.lr.is_finite() && o.adamw.lr > 0.0) {
        return Err(input(format!("--lr must be > 0, got {}", o.adamw.lr)));
    }
    if !(o.adamw.weight_decay.is_finite() && o.adamw.weight_decay >= 0.0) {
        return Err(input(format!(
            "--weight-decay must be ≥ 0, got {}",
            o.adamw.weight_decay
        )));
    }
    if o.max_length < 3 {
        return Err(input(format!(
            "--max-length must be at least 3, got {}",
            o.max_length
        )));
    }
    match o.schedule {
        super::Schedule::Epochs(0) | super::Schedule::Steps(0) => {
            return Err(input("--epochs / --steps must be at least 1".into()))
        }
        _ => {}
    }
    if o.checkpoint_every == 0 {
        return Err(input("--checkpoint-every must be at least 1".into()));
    }
    if o.resume && o.checkpoint_dir.is_none() {
        return Err(input("--resume needs --checkpoint-dir".into()));
    }
    if o.objective.needs_index() && o.index.is_none() {
        return Err(input(
            "the ranking objective needs --index DIR (the frozen document index)".into(),
        ));
    }
    if o.out.exists() && !o.force {
        return Err(input(format!(
            "{} already exists (pass --force to replace it)",
            o.out.display()
        )));
    }
    if let Some(name) = &o.name {
        crate::encoder::import::validate_name(name)?;
    }

    // The base bundle must carry weights.
    let base_manifest = EncoderManifest::read(&o.base)?;
    let weights_path = o.base.join(manifest::WEIGHTS_FILE);
    let config_path = o.base.join(manifest::CONFIG_FILE);
    let Some(expected_sha) = base_manifest.weights_sha256.clone() else {
        return Err(input(format!(
            "base bundle {} has no weights (it is serve-only, e.g. an ONNX import whose weights could not be recovered) and cannot be aligned",
            o.base.display()
        )));
    };
    if !weights_path.is_file() || !config_path.is_file() {
        return Err(input(format!(
            "base bundle {} lacks {} or {}: it cannot be aligned",
            o.base.display(),
            manifest::WEIGHTS_FILE,
            manifest::CONFIG_FILE
        )));
    }
    if base_manifest.pooling == Pooling::Pooled {
        return Err(input(format!(
            "base bundle {} pools inside its graph; alignment supports mean and cls pooling",
            o.base.display()
        )));
    }
    let weights_sha256 = manifest::sha256_file(&weights_path)?;
    if weights_sha256 != expected_sha {
        return Err(input(format!(
            "{}: sha256 does not match the manifest; the bundle is corrupt or was edited",
            weights_path.display()
        )));
    }
    let config = BertConfig::from_file(&config_path)?;
    let weights = BertWeights::load_safetensors(&weights_path)?;
    weights.validate(&config)?;
    if config.hidden_size != base_manifest.dimension {
        return Err(input(format!(
            "base bundle {}: weights have hidden size {}, the manifest says dimension {}",
            o.base.display(),
            config.hidden_size,
            base_manifest.dimension
        )));
    }
    let train_length = o.max_length.min(base_manifest.max_length);
    let tokenizer = TextTokenizer::from_file(
        &o.base.join(manifest::TOKENIZER_FILE),
        train_length,
        base_manifest.prefix.clone(),
    )?;

    if o.noise.iter().any(|k| k.needs_wordnet()) {
        crate::noise::check_wordnet()?;
    }
    if o.word_queries > 0 && o.noise.is_empty() {
        return Err(input(
            "--word-queries needs --noise: word queries have no variant files".into(),
        ));
    }
    let mut data = QueryData::load(&o.queries, &o.variants, &o.noise, o.seed, &tokenizer)?;
    data.add_word_queries(o.word_queries, &tokenizer)?;
    let plan = Plan::new(&data, o.schedule, o.batch_size)?;

    let index = match &o.index {
        None => None,
        Some(dir) => {
            let index = Index::load(dir)?;
            if index.dimension() != base_manifest.dimension {
                return Err(input(format!(
                    "index {} has dimension {}, the encoder produces {}",
                    dir.display(),
                    index.dimension(),
                    base_manifest.dimension
                )));
            }
            let fp = &index.manifest().encoder_fingerprint;
            if *fp != base_manifest.aligned_to {
                return Err(input(format!(
                    "index {} was built with document encoder {fp}, but {} is aligned to {}",
                    dir.display(),
                    o.base.display(),
                    base_manifest.aligned_to
                )));
            }
            if index.len() < o.loss.rank_k {
                return Err(input(format!(
                    "--rank-k {} exceeds the index's {} documents",
                    o.loss.rank_k,
                    index.len()
                )));
            }
            Some(index)
        }
    };

    let device = match o.device {
        TrainDevice::Cpu => Device::Cpu,
        TrainDevice::Cuda(n) => Device::new_cuda(n).map_err(|e| {
            input(format!(
                "--device cuda:{n} is not usable ({e}); CUDA training needs a build with --features cuda-train"
            ))
        })?,
    };

    let mut prepared = Prepared {
        options: o.clone(),
        base_manifest,
        config,
        weights,
        weights_sha256,
        tokenizer,
        data,
        plan,
        index,
        device,
        resume_from: None,
    };
    if o.resume {
        if let Some(dir) = &o.checkpoint_dir {
            let found = checkpoint::read_latest(dir)?;
            let key = prepared.run_key();
            if found.1.run_key != key {
                return Err(AlignError::Checkpoint {
                    path: dir.clone(),
                    message: "it belongs to a different run (base, data, objective or hyper-parameters differ)".into(),
                });
            }
            prepared.resume_from = Some(found);
        }
    }
    Ok(prepared)
}

/// Anchor vectors of the clean queries, computed once by the frozen base encoder.
pub(crate) struct AnchorCache {
    dim: usize,
    vectors: Vec<f32>,
    have: Vec<bool>,
    /// Ranking objective: the anchor's nearest documents and its softmax over them.
    neighbours: HashMap<usize, (Vec<usize>, Vec<f32>)>,
}

impl Prepared {
    /// Planned steps in total.
    pub fn total_steps(&self) -> usize {
        self.plan.steps.len()
    }

    /// Batches in one epoch.
    pub fn batches_per_epoch(&self) -> usize {
        self.plan.batches_per_epoch
    }

    /// What the training data consisted of.
    pub fn data_summary(&self) -> &super::DataSummary {
        &self.data.summary
    }

    /// Identity of a run for checkpoints: everything that changes the trajectory except its
    /// length (a run may be resumed with more steps).
    pub(crate) fn run_key(&self) -> String {
        let o = &self.options;
        let key = serde_json::json!({
            "base_weights": self.weights_sha256,
            "objective": o.objective.to_string(),
            "loss": o.loss,
            "adamw": o.adamw,
            "lr_schedule": o.lr_schedule,
            "batch_size": o.batch_size,
            "positives": o.positives,
            "max_length": o.max_length,
            "freeze_embeddings": o.freeze_embeddings,
            "seed": o.seed,
            "data": self.data.summary,
            "index": o.index.as_ref().map(|p| p.display().to_string()),
        });
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(key.to_string().as_bytes()))
    }

    /// The hyper-parameters recorded in the bundle's provenance.
    pub(crate) fn hyper_parameters(&self) -> serde_json::Value {
        let o = &self.options;
        serde_json::json!({
            "objective": o.objective.to_string(),
            "loss": o.loss,
            "optimizer": {"kind": "adamw", "params": o.adamw, "lr_schedule": o.lr_schedule},
            "batch_size": o.batch_size,
            "positives_per_query": o.positives,
            "max_length": o.max_length.min(self.base_manifest.max_length),
            "freeze_embeddings": o.freeze_embeddings,
            "seed": o.seed,
            "schedule": o.schedule,
            "index": o.index.as_ref().map(|p| p.display().to_string()),
        })
    }

    fn pool(&self, hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let pooled = match self.base_manifest.pooling {
            Pooling::Cls => cls_pool(hidden)?,
            _ => mean_pool(hidden, mask)?,
        };
        if self.base_manifest.normalize {
            l2_normalize(&pooled)
        } else {
            Ok(pooled)
        }
    }

    /// Encodes unpadded token rows with `model`: `[rows, H]`, and the padded length.
    fn embed(&self, model: &BertModel, rows: &[&[u32]]) -> Result<(Tensor, usize), AlignError> {
        let pad_id = self.tokenizer.pad_id() as u32;
        let (ids, mask, seq) = data::pad(rows, pad_id);
        let n = rows.len();
        let ids = Tensor::from_vec(ids, (n, seq), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, seq), &self.device)?;
        let types = ids.zeros_like()?;
        let hidden = model.forward(&ids, &mask, &types)?;
        Ok((self.pool(&hidden, &mask)?, seq))
    }

    fn compute_anchors(
        &self,
        anchor_model: &BertModel,
        needed: &[usize],
        progress: &dyn AlignProgress,
    ) -> Result<AnchorCache, AlignError> {
        let dim = self.config.hidden_size;
        let n = self.data.len();
        let mut cache = AnchorCache {
            dim,
            vectors: vec![0f32; n * dim],
            have: vec![false; n],
            neighbours: HashMap::new(),
        };
        let mut order = needed.to_vec();
        order.sort_by_key(|&i| (self.data.tokens[i].len(), i));
        // Batches of equal token length: no padding, so a query's anchor does not depend on
        // which other queries it was computed with (a resumed run gets bit-identical anchors).
        let mut chunks: Vec<&[usize]> = Vec::new();
        for group in order.chunk_by(|&a, &b| self.data.tokens[a].len() == self.data.tokens[b].len())
        {
            chunks.extend(group.chunks(64));
        }
        let mut done = 0;
        progress.anchors(0, order.len());
        for chunk in chunks {
            let rows: Vec<&[u32]> = chunk
                .iter()
                .map(|&i| self.data.tokens[i].as_slice())
                .collect();
            let (v, _) = self.embed(anchor_model, &rows)?;
            let v = v.detach().to_vec2::<f32>()?;
            for (&qi, row) in chunk.iter().zip(v) {
                cache.vectors[qi * dim..(qi + 1) * dim].copy_from_slice(&row);
                cache.have[qi] = true;
                if let Some(index) = &self.index {
                    let hits = index.search_exact(&row, self.options.loss.rank_k)?;
                    let t = self.options.loss.rank_temperature as f32;
                    let max = hits.iter().map(|h| h.score).fold(f32::MIN, f32::max);
                    let exps: Vec<f32> = hits.iter().map(|h| ((h.score - max) / t).exp()).collect();
                    let sum: f32 = exps.iter().sum();
                    let probs = exps.iter().map(|e| e / sum).collect();
                    cache
                        .neighbours
                        .insert(qi, (hits.iter().map(|h| h.index).collect(), probs));
                }
            }
            done += chunk.len();
            progress.anchors(done, order.len());
        }
        Ok(cache)
    }

    fn anchor_tensor(&self, cache: &AnchorCache, batch: &[usize]) -> Result<Tensor, AlignError> {
        let mut flat = Vec::with_capacity(batch.len() * cache.dim);
        for &qi in batch {
            if !cache.have[qi] {
                return Err(AlignError::Candle(format!(
                    "anchor of query {} was not computed",
                    self.data.ids[qi]
                )));
            }
            flat.extend_from_slice(&cache.vectors[qi * cache.dim..(qi + 1) * cache.dim]);
        }
        Ok(Tensor::from_vec(
            flat,
            (batch.len(), cache.dim),
            &self.device,
        )?)
    }

    fn ranking_targets(
        &self,
        cache: &AnchorCache,
        batch: &[usize],
    ) -> Result<Option<RankingTargets>, AlignError> {
        let Some(index) = &self.index else {
            return Ok(None);
        };
        if !self.options.objective.needs_index() {
            return Ok(None);
        }
        let r = self.options.loss.rank_k;
        let dim = cache.dim;
        let mut docs = Vec::with_capacity(batch.len() * r * dim);
        let mut teacher = Vec::with_capacity(batch.len() * r);
        for &qi in batch {
            let (idx, probs) = cache.neighbours.get(&qi).ok_or_else(|| {
                AlignError::Candle(format!("neighbours of query {} missing", self.data.ids[qi]))
            })?;
            if idx.len() != r {
                return Err(AlignError::Input(format!(
                    "the index returned {} neighbours for query {}, expected {r}",
                    idx.len(),
                    self.data.ids[qi]
                )));
            }
            for &d in idx {
                let v = index
                    .vector(d)
                    .ok_or_else(|| AlignError::Candle(format!("index has no vector {d}")))?;
                docs.extend_from_slice(v);
            }
            teacher.extend_from_slice(probs);
        }
        Ok(Some(RankingTargets {
            docs: Tensor::from_vec(docs, (batch.len(), r, dim), &self.device)?,
            teacher: Tensor::from_vec(teacher, (batch.len(), r), &self.device)?,
        }))
    }

    /// Trains, checkpoints, and writes the bundle (or stops at a step boundary when `stop` is set).
    pub fn train(
        self,
        progress: &dyn AlignProgress,
        stop: &AtomicBool,
    ) -> Result<AlignOutcome, AlignError> {
        let wall = Instant::now();
        let o = &self.options;
        let total = self.total_steps();
        let first_step = self
            .resume_from
            .as_ref()
            .map(|(_, meta)| meta.step.min(total))
            .unwrap_or(0);
        let anchor_start = Instant::now();
        let (model, varmap, cache) = self.models(first_step, progress)?;
        let anchor_seconds = anchor_start.elapsed().as_secs_f64();
        // Created before a checkpoint is restored: with `--decay-to base` it keeps the base
        // weights as the decay's target, also for a resumed run.
        let mut optimizer = AdamW::new(named_trainable(&varmap, o.freeze_embeddings), o.adamw)?;
        let mut curve: Vec<StepRecord> = Vec::new();
        let mut trained_before = 0.0;
        if let Some((dir, meta)) = &self.resume_from {
            checkpoint::restore(dir, meta, &varmap, &mut optimizer, &self.device)?;
            curve = meta.curve.clone();
            curve.truncate(first_step);
            trained_before = meta.train_seconds;
            progress.note(&format!(
                "resumed from {} at step {first_step}/{total}",
                dir.display()
            ));
        }

        progress.start(first_step, total);
        let train_start = Instant::now();
        let mut session_pairs = 0usize;
        let mut step = first_step;
        let checkpoint_dir = o.interrupt_checkpoint_dir();
        while step < total {
            if stop.load(Ordering::SeqCst) {
                let elapsed = trained_before + train_start.elapsed().as_secs_f64();
                checkpoint::save(
                    &checkpoint_dir,
                    &self.run_key(),
                    step,
                    total,
                    elapsed,
                    &curve,
                    &varmap,
                    &optimizer,
                )?;
                return Ok(AlignOutcome::Interrupted {
                    step,
                    total_steps: total,
                    checkpoint: checkpoint_dir,
                });
            }
            let record = self.train_step(&model, &mut optimizer, &cache, step)?;
            session_pairs += record.pairs;
            progress.step(&record);
            curve.push(record);
            step += 1;
            if let Some(dir) = &o.checkpoint_dir {
                if step.is_multiple_of(o.checkpoint_every) || step == total {
                    let elapsed = trained_before + train_start.elapsed().as_secs_f64();
                    checkpoint::save(
                        dir,
                        &self.run_key(),
                        step,
                        total,
                        elapsed,
                        &curve,
                        &varmap,
                        &optimizer,
                    )?;
                }
            }
        }
        let train_seconds = train_start.elapsed().as_secs_f64();
        let final_losses = final_losses(&curve);
        let pairs_per_second = if train_seconds > 0.0 {
            session_pairs as f64 / train_seconds
        } else {
            0.0
        };
        let trained = crate::model::bert::varmap_to_weights(&varmap)?;
        let summary = serde_json::json!({
            "steps": total,
            "session_steps": total - first_step,
            "resumed_from_step": self.resume_from.as_ref().map(|_| first_step),
            "epochs_planned": self.plan.steps.last().map(|(e, _)| e + 1),
            "batches_per_epoch": self.plan.batches_per_epoch,
            "final_losses": final_losses,
            "pairs_per_second": pairs_per_second,
            "anchor_seconds": anchor_seconds,
            "train_seconds": trained_before + train_seconds,
            "wall_seconds": wall.elapsed().as_secs_f64(),
            "data": self.data.summary,
        });
        let manifest = bundle::write(&self, &trained, &summary, &curve)?;
        progress.note(&format!("wrote {}", o.out.display()));
        Ok(AlignOutcome::Finished(Box::new(AlignReport {
            manifest,
            steps: total,
            session_steps: total - first_step,
            final_losses,
            pairs_per_second,
            anchor_seconds,
            train_seconds,
            wall_seconds: wall.elapsed().as_secs_f64(),
        })))
    }

    fn train_step(
        &self,
        model: &BertModel,
        optimizer: &mut AdamW,
        cache: &AnchorCache,
        step: usize,
    ) -> Result<StepRecord, AlignError> {
        let start = Instant::now();
        let (out, pairs, sequence) = self.step_loss(model, cache, step)?;
        let loss = out.total.to_scalar::<f32>()?;
        if !loss.is_finite() {
            return Err(AlignError::Candle(format!(
                "loss became {loss} at step {}; lower --lr",
                step + 1
            )));
        }
        let forward_seconds = start.elapsed().as_secs_f64();
        let grads = out.total.backward()?;
        let backward_seconds = start.elapsed().as_secs_f64() - forward_seconds;
        let lr = self.options.adamw.lr * self.options.lr_schedule.factor(step, self.total_steps());
        optimizer.set_lr(lr);
        optimizer.step(&grads)?;
        drop(grads);
        let update_seconds = start.elapsed().as_secs_f64() - forward_seconds - backward_seconds;
        let mut parts = BTreeMap::new();
        for (name, t) in &out.parts {
            parts.insert(name.clone(), t.to_scalar::<f32>()?);
        }
        Ok(StepRecord {
            step: step + 1,
            total_steps: self.total_steps(),
            epoch: self.plan.steps[step].0,
            loss,
            parts,
            pairs,
            sequence,
            seconds: start.elapsed().as_secs_f64(),
            forward_seconds,
            backward_seconds,
            update_seconds,
            lr,
        })
    }

    /// The loss of step `step` (0-based) with `model`: one student forward pass over the clean
    /// queries (when a term needs them) and the noisy positives together; anchors from the cache.
    /// Returns the loss, the pairs and the padded length.
    pub(crate) fn step_loss(
        &self,
        model: &BertModel,
        cache: &AnchorCache,
        step: usize,
    ) -> Result<(objective::LossOutput, usize, usize), AlignError> {
        let o = &self.options;
        let (epoch, batch) = &self.plan.steps[step];
        let k = o.positives;
        let sample = data::sample_step(&self.data, step, *epoch, batch, k)?;
        let noisy_rows = data::tokenize(&self.tokenizer, &sample.noisy)?;
        let need_clean = o.objective.needs_clean();
        let mut rows: Vec<&[u32]> = Vec::with_capacity(batch.len() * (k + 1));
        if need_clean {
            rows.extend(batch.iter().map(|&qi| self.data.tokens[qi].as_slice()));
        }
        rows.extend(noisy_rows.iter().map(Vec::as_slice));
        let (vectors, sequence) = self.embed(model, &rows)?;
        let b = batch.len();
        let (clean, noisy) = if need_clean {
            (Some(vectors.narrow(0, 0, b)?), vectors.narrow(0, b, b * k)?)
        } else {
            (None, vectors)
        };
        let anchor = self.anchor_tensor(cache, batch)?;
        let negatives = Tensor::from_vec(sample.negatives, b, &self.device)?;
        let ranking = self.ranking_targets(cache, batch)?;
        let out = objective::compute(
            &o.objective,
            &o.loss,
            &BatchVectors {
                clean: clean.as_ref(),
                noisy: &noisy,
                anchor: &anchor,
                negatives: &negatives,
                k,
                ranking: ranking.as_ref(),
            },
        )?;
        Ok((out, b * k, sequence))
    }

    /// A trainable copy and a frozen anchor copy of the base network, plus the anchor cache for
    /// the queries of steps `from..` (for tests and tools that drive steps themselves).
    pub(crate) fn models(
        &self,
        from: usize,
        progress: &dyn AlignProgress,
    ) -> Result<(BertModel, VarMap, AnchorCache), AlignError> {
        let (mut model, varmap) =
            BertModel::from_weights(&self.config, &self.weights, &self.device)?;
        model.set_freeze_word_embeddings(self.options.freeze_embeddings);
        let (anchor_model, _) = BertModel::from_weights(&self.config, &self.weights, &self.device)?;
        let needed: Vec<usize> = self.plan.steps[from..]
            .iter()
            .flat_map(|(_, b)| b.iter().copied())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let cache = self.compute_anchors(&anchor_model, &needed, progress)?;
        Ok((model, varmap, cache))
    }
}

/// The trainable variables with their names, in [`trainable_vars`] order.
pub(crate) fn named_trainable(varmap: &VarMap, freeze: bool) -> Vec<(String, Var)> {
    let names: HashMap<_, String> = varmap
        .data()
        .lock()
        .map(|d| {
            d.iter()
                .map(|(n, v)| (v.as_tensor().id(), n.clone()))
                .collect()
        })
        .unwrap_or_default();
    trainable_vars(varmap, freeze)
        .into_iter()
        .filter_map(|v| names.get(&v.as_tensor().id()).map(|n| (n.clone(), v)))
        .collect()
}

/// Mean of each loss part over the last (up to) 10 steps.
fn final_losses(curve: &[StepRecord]) -> BTreeMap<String, f32> {
    let tail = &curve[curve.len().saturating_sub(10)..];
    let mut sums: BTreeMap<String, (f32, usize)> = BTreeMap::new();
    for r in tail {
        let e = sums.entry("total".into()).or_default();
        e.0 += r.loss;
        e.1 += 1;
        for (k, v) in &r.parts {
            let e = sums.entry(k.clone()).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(k, (s, n))| (k, s / n.max(1) as f32))
        .collect()
}
