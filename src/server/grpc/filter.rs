//! The protobuf `Filter` message as the JSON shape `/search` takes (Qdrant's), so one parser
//! (`query::Filter::parse`) serves both transports with the same meaning and the same errors.
//! The one thing JSON cannot say, a bound that is not a finite number (NaN, ±infinity), is
//! refused here, at the path the parser would name.

use crate::query::filter::FilterError;

use super::pb;

/// A protobuf filter at `path` (`filter`) in Qdrant's JSON shape (what `Filter::parse` reads).
pub(super) fn filter_json(f: &pb::Filter, path: &str) -> Result<serde_json::Value, FilterError> {
    use serde_json::json;
    let list = |c: &[pb::Condition], at: &str| -> Result<serde_json::Value, FilterError> {
        c.iter()
            .enumerate()
            .map(|(i, c)| condition_json(c, &format!("{at}[{i}]")))
            .collect()
    };
    let mut o = serde_json::Map::new();
    if !f.must.is_empty() {
        o.insert("must".into(), list(&f.must, &format!("{path}.must"))?);
    }
    if !f.should.is_empty() {
        o.insert("should".into(), list(&f.should, &format!("{path}.should"))?);
    }
    if !f.must_not.is_empty() {
        o.insert(
            "must_not".into(),
            list(&f.must_not, &format!("{path}.must_not"))?,
        );
    }
    if let Some(m) = &f.min_should {
        let conditions = list(&m.conditions, &format!("{path}.min_should.conditions"))?;
        o.insert(
            "min_should".into(),
            json!({"conditions": conditions, "min_count": m.min_count}),
        );
    }
    Ok(serde_json::Value::Object(o))
}

fn condition_json(c: &pb::Condition, path: &str) -> Result<serde_json::Value, FilterError> {
    use pb::condition::ConditionOneOf as C;
    use pb::r#match::MatchValue as M;
    use serde_json::json;
    Ok(match &c.condition_one_of {
        None => json!({}),
        Some(C::Filter(f)) => filter_json(f, path)?,
        Some(C::IsEmpty(e)) => json!({"is_empty": {"key": e.key}}),
        Some(C::IsNull(e)) => json!({"is_null": {"key": e.key}}),
        Some(C::HasId(h)) => json!({"has_id": h.ids}),
        Some(C::Field(f)) => {
            let mut o = serde_json::Map::new();
            o.insert("key".into(), json!(f.key));
            if let Some(m) = &f.r#match {
                let m = match &m.match_value {
                    None => json!({}),
                    Some(M::Keyword(s)) => json!({"value": s}),
                    Some(M::Integer(i)) => json!({"value": i}),
                    Some(M::Boolean(b)) => json!({"value": b}),
                    Some(M::Keywords(l)) => json!({"any": l.strings}),
                    Some(M::Integers(l)) => json!({"any": l.integers}),
                    Some(M::ExceptKeywords(l)) => json!({"except": l.strings}),
                    Some(M::ExceptIntegers(l)) => json!({"except": l.integers}),
                };
                o.insert("match".into(), m);
            }
            let mut range = serde_json::Map::new();
            if let Some(r) = &f.range {
                for (k, v) in [("lt", r.lt), ("gt", r.gt), ("gte", r.gte), ("lte", r.lte)] {
                    match v {
                        Some(v) if !v.is_finite() => {
                            return Err(FilterError::at(
                                &format!("{path}.range.{k}"),
                                format!("a bound must be a finite number, got {v}"),
                            ))
                        }
                        Some(v) => {
                            range.insert(k.into(), json!(v));
                        }
                        None => {}
                    }
                }
            }
            if let Some(r) = &f.integer_range {
                for (k, v) in [("lt", r.lt), ("gt", r.gt), ("gte", r.gte), ("lte", r.lte)] {
                    if let Some(v) = v {
                        range.insert(k.into(), json!(v));
                    }
                }
            }
            if let Some(r) = &f.datetime_range {
                for (k, v) in [
                    ("lt", &r.lt),
                    ("gt", &r.gt),
                    ("gte", &r.gte),
                    ("lte", &r.lte),
                ] {
                    if !v.is_empty() {
                        range.insert(k.into(), json!(v));
                    }
                }
            }
            let ranges = [
                f.range.is_some(),
                f.integer_range.is_some(),
                f.datetime_range.is_some(),
            ];
            if ranges.iter().filter(|&&set| set).count() > 1 {
                return Err(FilterError::at(
                    &format!("{path}.range"),
                    "give one of range, integer_range, datetime_range",
                ));
            }
            // An empty range message still asks for a range (and is refused as one).
            if ranges.contains(&true) {
                o.insert("range".into(), serde_json::Value::Object(range));
            }
            serde_json::Value::Object(o)
        }
    })
}
