//! AdamW with inspectable state, so checkpoints can save and restore the moments exactly
//! (candle's `AdamW` keeps them private).

use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};

/// AdamW hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWParams {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay.
    pub beta1: f64,
    /// Second-moment decay.
    pub beta2: f64,
    /// Added to the root of the second moment.
    pub eps: f64,
    /// Decoupled weight decay (0 by default: decay pulls away from the anchor).
    pub weight_decay: f64,
}

impl Default for AdamWParams {
    fn default() -> Self {
        AdamWParams {
            lr: 5e-5,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }
}

struct Slot {
    name: String,
    var: Var,
    m: Tensor,
    v: Tensor,
}

/// AdamW over named variables (the same update as `candle_nn::AdamW`).
pub struct AdamW {
    slots: Vec<Slot>,
    params: AdamWParams,
    /// Updates applied so far (the bias-correction step count).
    pub steps: u64,
}

impl AdamW {
    /// An optimiser for `vars` (name, variable), moments at zero.
    pub fn new(vars: Vec<(String, Var)>, params: AdamWParams) -> candle_core::Result<Self> {
        let slots = vars
            .into_iter()
            .map(|(name, var)| {
                let m = var.zeros_like()?;
                let v = var.zeros_like()?;
                Ok(Slot { name, var, m, v })
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(AdamW {
            slots,
            params,
            steps: 0,
        })
    }

    /// Names of the variables it updates, in order.
    pub fn names(&self) -> Vec<&str> {
        self.slots.iter().map(|s| s.name.as_str()).collect()
    }

    /// One update from the gradients (variables without a gradient are left alone).
    pub fn step(&mut self, grads: &GradStore) -> candle_core::Result<()> {
        self.steps += 1;
        let p = self.params;
        let t = self.steps as i32;
        let scale_m = 1.0 / (1.0 - p.beta1.powi(t));
        let scale_v = 1.0 / (1.0 - p.beta2.powi(t));
        for slot in &mut self.slots {
            let theta = slot.var.as_tensor();
            let Some(g) = grads.get(theta) else {
                continue;
            };
            let g = g.detach();
            let m = ((&slot.m * p.beta1)? + (&g * (1.0 - p.beta1))?)?;
            let v = ((&slot.v * p.beta2)? + (g.sqr()? * (1.0 - p.beta2))?)?;
            let update = ((&m * scale_m)? / ((&v * scale_v)?.sqrt()? + p.eps)?)?;
            let next = ((theta.detach() * (1.0 - p.lr * p.weight_decay))? - (update * p.lr)?)?;
            slot.var.set(&next)?;
            slot.m = m;
            slot.v = v;
        }
        Ok(())
    }

    /// The moments as named tensors (`m.<name>`, `v.<name>`), for a checkpoint.
    pub fn state(&self) -> HashMap<String, Tensor> {
        let mut out = HashMap::new();
        for s in &self.slots {
            out.insert(format!("m.{}", s.name), s.m.clone());
            out.insert(format!("v.{}", s.name), s.v.clone());
        }
        out
    }

    /// Restores moments saved by [`AdamW::state`]; every variable's moments must be present with
    /// the variable's shape.
    pub fn load_state(
        &mut self,
        state: &HashMap<String, Tensor>,
        steps: u64,
    ) -> Result<(), String> {
        for s in &mut self.slots {
            for (prefix, target) in [("m", &mut s.m), ("v", &mut s.v)] {
                let key = format!("{prefix}.{}", s.name);
                let t = state
                    .get(&key)
                    .ok_or_else(|| format!("optimizer state lacks {key}"))?;
                if t.dims() != s.var.dims() {
                    return Err(format!(
                        "optimizer state {key} has shape {:?}, the variable {:?}",
                        t.dims(),
                        s.var.dims()
                    ));
                }
                *target = t.to_device(s.var.device()).map_err(|e| e.to_string())?;
            }
        }
        self.steps = steps;
        Ok(())
    }
}
