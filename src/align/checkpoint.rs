//! Checkpoints: weights + AdamW moments + step + training curve.
//!
//! Layout of a checkpoint directory:
//!
//! - `step-NNNNNNNN/weights.safetensors`: every tensor of the model (canonical names);
//! - `step-NNNNNNNN/optimizer.safetensors`: AdamW moments `m.<name>`, `v.<name>`;
//! - `step-NNNNNNNN/state.json`: [`CheckpointMeta`] (step, run key, optimiser step count, curve);
//! - `latest.json`: `{"dir": "step-NNNNNNNN"}`, replaced atomically (temporary file + rename)
//!   only after the step directory is complete, then older step directories are removed.
//!
//! No RNG state is needed: the batch plan and every per-step choice are pure functions of the
//! seed and the step number, so a resumed run continues exactly where it stopped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use serde::{Deserialize, Serialize};

use super::optim::AdamW;
use super::train::StepRecord;
use super::AlignError;
use crate::model::bert::varmap_to_weights;
use crate::model::BertWeights;

/// Format of `state.json`.
const FORMAT: u32 = 1;

/// What `state.json` records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointMeta {
    /// Checkpoint format.
    pub format: u32,
    /// Identity of the run (base, data, objective, hyper-parameters, seed).
    pub run_key: String,
    /// Steps completed.
    pub step: usize,
    /// Steps planned when it was written.
    pub total_steps: usize,
    /// AdamW's bias-correction step count.
    pub optimizer_steps: u64,
    /// Training seconds so far.
    pub train_seconds: f64,
    /// Training curve so far.
    pub curve: Vec<StepRecord>,
}

#[derive(Serialize, Deserialize)]
struct Latest {
    dir: String,
}

fn ck_err(path: &Path, message: impl Into<String>) -> AlignError {
    AlignError::Checkpoint {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Writes a checkpoint of `step` completed steps into `dir`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn save(
    dir: &Path,
    run_key: &str,
    step: usize,
    total_steps: usize,
    train_seconds: f64,
    curve: &[StepRecord],
    varmap: &VarMap,
    optimizer: &AdamW,
) -> Result<(), AlignError> {
    std::fs::create_dir_all(dir).map_err(|e| AlignError::io(dir, e))?;
    let name = format!("step-{step:08}");
    let final_dir = dir.join(&name);
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| AlignError::io(&tmp, e))?;
    }
    std::fs::create_dir(&tmp).map_err(|e| AlignError::io(&tmp, e))?;
    varmap_to_weights(varmap)?.save_safetensors(&tmp.join("weights.safetensors"))?;
    let state = optimizer.state()?;
    candle_core::safetensors::save(&state, tmp.join("optimizer.safetensors"))?;
    let meta = CheckpointMeta {
        format: FORMAT,
        run_key: run_key.to_string(),
        step,
        total_steps,
        optimizer_steps: optimizer.steps,
        train_seconds,
        curve: curve.to_vec(),
    };
    let text = serde_json::to_string(&meta).map_err(|e| ck_err(dir, e.to_string()))?;
    std::fs::write(tmp.join("state.json"), text).map_err(|e| AlignError::io(&tmp, e))?;
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(|e| AlignError::io(&final_dir, e))?;
    }
    std::fs::rename(&tmp, &final_dir).map_err(|e| AlignError::io(&final_dir, e))?;
    crate::atomic_file::sync_dir(dir).map_err(|e| AlignError::io(dir, e))?;
    let latest = dir.join("latest.json");
    let text = serde_json::to_string(&Latest { dir: name.clone() })
        .map_err(|e| ck_err(dir, e.to_string()))?;
    crate::atomic_file::write(&latest, text.as_bytes()).map_err(|e| AlignError::io(&latest, e))?;
    // Older step directories are no longer referenced.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let n = entry.file_name().to_string_lossy().into_owned();
            if n.starts_with("step-") && n != name {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    Ok(())
}

/// Reads `latest.json` and its `state.json`.
pub(crate) fn read_latest(dir: &Path) -> Result<(PathBuf, CheckpointMeta), AlignError> {
    let latest = dir.join("latest.json");
    let text = std::fs::read_to_string(&latest)
        .map_err(|e| ck_err(dir, format!("no checkpoint to resume from ({e})")))?;
    let l: Latest = serde_json::from_str(&text).map_err(|e| ck_err(&latest, e.to_string()))?;
    if l.dir.contains('/') || l.dir.contains("..") {
        return Err(ck_err(&latest, format!("invalid directory {:?}", l.dir)));
    }
    let step_dir = dir.join(&l.dir);
    let state = step_dir.join("state.json");
    let text = std::fs::read_to_string(&state).map_err(|e| ck_err(&state, e.to_string()))?;
    let meta: CheckpointMeta =
        serde_json::from_str(&text).map_err(|e| ck_err(&state, e.to_string()))?;
    if meta.format != FORMAT {
        return Err(ck_err(
            &state,
            format!(
                "format {} is not supported (this build reads {FORMAT})",
                meta.format
            ),
        ));
    }
    Ok((step_dir, meta))
}

/// Loads a checkpoint's weights into `varmap` and its moments into `optimizer`.
pub(crate) fn restore(
    step_dir: &Path,
    meta: &CheckpointMeta,
    varmap: &VarMap,
    optimizer: &mut AdamW,
    device: &Device,
) -> Result<(), AlignError> {
    let weights = BertWeights::load_safetensors(&step_dir.join("weights.safetensors"))?;
    {
        let data = varmap
            .data()
            .lock()
            .map_err(|_| ck_err(step_dir, "variable map lock poisoned"))?;
        for (name, var) in data.iter() {
            let w = weights
                .tensors
                .get(name)
                .ok_or_else(|| ck_err(step_dir, format!("weights lack {name}")))?;
            if w.shape != var.dims() {
                return Err(ck_err(
                    step_dir,
                    format!("{name} has shape {:?}, the model {:?}", w.shape, var.dims()),
                ));
            }
            let t = Tensor::from_slice(&w.data, w.shape.as_slice(), device)?;
            var.set(&t)?;
        }
    }
    let path = step_dir.join("optimizer.safetensors");
    let state: HashMap<String, Tensor> =
        candle_core::safetensors::load(&path, device).map_err(|e| ck_err(&path, e.to_string()))?;
    optimizer
        .load_state(&state, meta.optimizer_steps)
        .map_err(|m| ck_err(&path, m))
}
