//! Which columns of a table hold what capot reads, and how its vectors are compared: capot's own
//! layout for tables `capot index build --store` made, or an operator's mapping
//! (`--store-columns id=doc_id,embedding=emb,text=body`) for a table another pipeline filled.

use super::StoreError;

/// The columns capot reads, as quoted SQL identifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    pub id: String,
    pub embedding: String,
    pub text: String,
    /// None: the table has no titles (they read as empty).
    pub title: Option<String>,
    /// None: the table has no metadata (filters on fields are refused).
    pub metadata: Option<String>,
}

impl Default for Columns {
    /// The layout of tables `capot index build --store` creates.
    fn default() -> Self {
        Columns {
            id: quote("id"),
            embedding: quote("embedding"),
            text: quote("text"),
            title: Some(quote("title")),
            metadata: Some(quote("metadata")),
        }
    }
}

impl Columns {
    /// Parses `id=COL,embedding=COL,text=COL[,title=COL][,metadata=COL]`.
    pub fn parse(spec: &str) -> Result<Columns, StoreError> {
        let bad = |why: String| StoreError::Invalid(format!("--store-columns: {why}"));
        let (mut id, mut embedding, mut text, mut title, mut metadata) =
            (None, None, None, None, None);
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (role, column) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("{part:?} is not ROLE=COLUMN")))?;
            let column = column.trim();
            if !is_identifier(column) {
                return Err(bad(format!(
                    "column {column:?}: use letters, digits and _ (at most 63, not starting with a digit)"
                )));
            }
            let slot = match role.trim() {
                "id" => &mut id,
                "embedding" => &mut embedding,
                "text" => &mut text,
                "title" => &mut title,
                "metadata" => &mut metadata,
                other => {
                    return Err(bad(format!(
                        "unknown role {other:?} (id, embedding, text, title, metadata)"
                    )))
                }
            };
            if slot.replace(quote(column)).is_some() {
                return Err(bad(format!("{} is given twice", role.trim())));
            }
        }
        let need = |slot: Option<String>, role: &str| {
            slot.ok_or_else(|| bad(format!("{role}=COLUMN is required")))
        };
        Ok(Columns {
            id: need(id, "id")?,
            embedding: need(embedding, "embedding")?,
            text: need(text, "text")?,
            title,
            metadata,
        })
    }

    /// The title as a select-list expression: empty text when the table has no titles or a
    /// row has none (NULL).
    pub fn title_expr(&self) -> String {
        self.title
            .as_ref()
            .map_or_else(|| "''".to_string(), |t| format!("coalesce({t}::text, '')"))
    }

    /// The text as a select-list expression: empty text where a row has none (NULL).
    pub fn text_expr(&self) -> String {
        format!("coalesce({}::text, '')", self.text)
    }

    /// The metadata as a select-list expression (NULL when the table has none).
    pub fn metadata_expr(&self) -> String {
        self.metadata
            .as_ref()
            .map_or_else(|| "NULL::jsonb".to_string(), |m| format!("{m}::jsonb"))
    }

    /// The unquoted name of a quoted column.
    pub fn name(quoted: &str) -> &str {
        quoted.trim_matches('"')
    }
}

/// How the table's HNSW index compares vectors, so searches order by its operator (else
/// PostgreSQL scans the table) and report a similarity where higher is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// `vector_ip_ops`, `<#>` (negative inner product): score = inner product.
    InnerProduct,
    /// `vector_cosine_ops`, `<=>` (cosine distance): score = 1 − distance, the cosine.
    Cosine,
    /// `vector_l2_ops`, `<->` (Euclidean distance d): score = 1 − d²/2, the inner product of unit
    /// vectors.
    L2,
}

impl Metric {
    /// The operator class of a pgvector index, if it is one of `vector`'s.
    pub fn of_opclass(name: &str) -> Option<Metric> {
        match name {
            "vector_ip_ops" => Some(Metric::InnerProduct),
            "vector_cosine_ops" => Some(Metric::Cosine),
            "vector_l2_ops" => Some(Metric::L2),
            _ => None,
        }
    }

    /// The distance operator ORDER BY uses.
    pub fn operator(self) -> &'static str {
        match self {
            Metric::InnerProduct => "<#>",
            Metric::Cosine => "<=>",
            Metric::L2 => "<->",
        }
    }

    /// The score of a row at `distance` (higher is nearer).
    pub fn score(self, distance: f64) -> f32 {
        (match self {
            Metric::InnerProduct => -distance,
            Metric::Cosine => 1.0 - distance,
            Metric::L2 => 1.0 - distance * distance / 2.0,
        }) as f32
    }

    /// The name `/info` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::InnerProduct => "inner_product",
            Metric::Cosine => "cosine",
            Metric::L2 => "l2",
        }
    }
}

/// A plain SQL identifier: letters, digits and `_`, not starting with a digit, at most 63.
fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

fn quote(column: &str) -> String {
    format!("\"{column}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_names_every_required_role_once() {
        let c = Columns::parse("id=doc_id, embedding=emb,text=body,metadata=attrs").unwrap();
        assert_eq!(c.id, "\"doc_id\"");
        assert_eq!(c.embedding, "\"emb\"");
        assert_eq!(c.title, None);
        assert_eq!(c.title_expr(), "''");
        assert_eq!(c.text_expr(), "coalesce(\"body\"::text, '')");
        let titled = Columns::parse("id=a,embedding=b,text=c,title=d").unwrap();
        assert_eq!(titled.title_expr(), "coalesce(\"d\"::text, '')");
        assert_eq!(c.metadata_expr(), "\"attrs\"::jsonb");
        for (spec, why) in [
            ("id=a,text=b", "embedding=COLUMN is required"),
            ("id=a,embedding=b,text=c,id=d", "id is given twice"),
            ("id=a,embedding=b,text=c,body=d", "unknown role \"body\""),
            ("id=a,embedding=b;drop,text=c", "column \"b;drop\""),
            ("id=a,embedding=\"b\",text=c", "column \"\\\"b\\\"\""),
            ("id,embedding=b,text=c", "\"id\" is not ROLE=COLUMN"),
        ] {
            let e = Columns::parse(spec).unwrap_err().to_string();
            assert!(e.contains(why), "{spec}: {e}");
        }
    }

    #[test]
    fn scores_are_similarities_that_agree_for_unit_vectors() {
        // Two unit vectors at inner product 0.6: distances as pgvector reports them.
        let ip = 0.6f64;
        assert!((Metric::InnerProduct.score(-ip) - 0.6).abs() < 1e-6);
        assert!((Metric::Cosine.score(1.0 - ip) - 0.6).abs() < 1e-6);
        assert!((Metric::L2.score((2.0 - 2.0 * ip).sqrt()) - 0.6).abs() < 1e-6);
        assert_eq!(
            Metric::of_opclass("vector_cosine_ops"),
            Some(Metric::Cosine)
        );
        assert_eq!(Metric::of_opclass("halfvec_ip_ops"), None);
    }
}
