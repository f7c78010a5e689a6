//! The gRPC messages in and out: requests into the pipeline's, outcomes and errors into
//! responses and statuses.

use super::*;

/// The gRPC status for an API error: the code follows the HTTP status, the message is kept, and
/// the stable error code travels in the `capot-error-code` metadata.
pub fn to_status(e: &ApiError) -> Status {
    let code = match e.status {
        StatusCode::BAD_REQUEST
        | StatusCode::UNPROCESSABLE_ENTITY
        | StatusCode::UNSUPPORTED_MEDIA_TYPE => Code::InvalidArgument,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => Code::Unimplemented,
        StatusCode::CONFLICT => Code::FailedPrecondition,
        StatusCode::PAYLOAD_TOO_LARGE => Code::OutOfRange,
        StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
        StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
        s if s.is_client_error() => Code::InvalidArgument,
        _ => Code::Internal,
    };
    let mut metadata = MetadataMap::new();
    if let Ok(v) = e.code.parse() {
        metadata.insert(ERROR_CODE_KEY, v);
    }
    Status::with_metadata(code, e.message.clone(), metadata)
}

/// Whether a status is tonic's answer to bytes that do not decode as the method's message: the
/// client's error, though gRPC's status-code table names INTERNAL for it.
pub(super) fn is_decode_error(code: Code, message: &str) -> bool {
    code == Code::Internal
        && (message.starts_with("failed to decode") || message.starts_with("failed%20to%20decode"))
}

/// Rewrites tonic's INTERNAL answer to an undecodable unary message (sent before any handler
/// runs, as a trailers-only response) to INVALID_ARGUMENT with capot's `invalid_request` code, so
/// a client's malformed bytes are never reported as a server fault.
pub(super) fn decode_errors_are_invalid_argument(
    mut resp: axum::http::Response<tonic::body::Body>,
) -> axum::http::Response<tonic::body::Body> {
    let headers = resp.headers_mut();
    let decode = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .is_some_and(|c| {
            let message = headers
                .get("grpc-message")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            is_decode_error(Code::from_i32(c), message)
        });
    if decode {
        let invalid = (Code::InvalidArgument as i32).to_string();
        if let Ok(v) = axum::http::HeaderValue::from_str(&invalid) {
            headers.insert("grpc-status", v);
        }
        headers.insert(
            ERROR_CODE_KEY,
            axum::http::HeaderValue::from_static("invalid_request"),
        );
    }
    resp
}

pub(super) fn non_empty(s: String) -> Option<String> {
    if s.is_empty() {
        None
    } else {
        Some(s)
    }
}

pub(super) fn to_usize(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

pub(super) fn to_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// An optional name field: empty means unset; anything else must parse.
pub(super) fn parse_name<T: std::str::FromStr<Err = String>>(
    value: String,
    field: &str,
) -> Result<Option<T>, ApiError> {
    non_empty(value)
        .map(|v| {
            v.parse()
                .map_err(|e: String| ApiError::invalid(format!("{field}: {e}")).with_param(field))
        })
        .transpose()
}

pub(super) fn search_request(req: pb::SearchRequest) -> Result<query::SearchRequest, ApiError> {
    // The message becomes the JSON shape HTTP takes, so one parser gives both transports the
    // same filter and the same errors (paths name the JSON members).
    let filter = req
        .filter
        .as_ref()
        .map(|f| query::Filter::parse(&super::filter::filter_json(f, "filter")?, "filter"))
        .transpose()
        .map_err(crate::query::stages::filter_error)?;
    Ok(query::SearchRequest {
        params: SearchParams {
            texts: req.queries,
            field: "queries",
            k: req.k.map(to_usize).unwrap_or(DEFAULT_K),
            encoder: non_empty(req.encoder),
            ef: req.ef.map(to_usize),
            repair: parse_name(req.repair, "repair")?,
            repair_fusion: parse_name(req.repair_fusion, "repair_fusion")?,
            filter,
            with_metadata: req.with_metadata,
            after: req.after,
            deadline: None,
        },
        fusion: (!req.fusion.is_empty()).then_some(req.fusion),
    })
}

pub(super) fn encoder_ref(e: EncoderRef) -> pb::EncoderRef {
    pb::EncoderRef {
        name: e.name,
        version: e.version,
    }
}

pub(super) fn search_response(out: SearchOutcome) -> pb::SearchResponse {
    let fusion_name = out.repair_fusion.as_str();
    let repairs = out
        .repairs
        .iter()
        .map(|r| match r {
            None => pb::QueryRepair::default(),
            Some(r) => pb::QueryRepair {
                changed: true,
                text: r.text.clone(),
                edits: r
                    .edits
                    .iter()
                    .map(|e| pb::RepairEdit {
                        from: e.from.clone(),
                        to: e.to.clone(),
                        distance: u32::from(e.distance),
                        confidence: e.confidence,
                        kind: e.kind.as_str().to_string(),
                        start: u32::try_from(e.start).unwrap_or(u32::MAX),
                    })
                    .collect(),
                fusion: fusion_name.to_string(),
            },
        })
        .collect();
    let encoder = out.served.encoder().cloned().map(encoder_ref);
    let (routed_to, encoders, fusion) = match out.served {
        Served::One(_) => (Vec::new(), Vec::new(), None),
        Served::Routed {
            routed_to,
            encoders,
        } => (
            routed_to,
            encoders.into_iter().map(encoder_ref).collect(),
            None,
        ),
        Served::Fused(f) => (
            Vec::new(),
            Vec::new(),
            Some(pb::FusionInfo {
                method: f.method.to_string(),
                k: f.k,
                depth: to_u32(f.depth),
                encoders: f
                    .encoders
                    .into_iter()
                    .map(|e| pb::FusedEncoder {
                        requested: e.requested,
                        name: e.name,
                        version: e.version,
                    })
                    .collect(),
            }),
        ),
    };
    let t = out.timings;
    pb::SearchResponse {
        repairs,
        results: out
            .results
            .into_iter()
            .map(|hits| pb::QueryResult {
                hits: hits
                    .into_iter()
                    .map(|h| pb::SearchHit {
                        id: h.id,
                        score: h.score,
                        rank: to_u32(h.rank),
                        title: h.title,
                        text: h.text,
                        metadata_json: h.metadata.map(|m| m.to_string()).unwrap_or_default(),
                    })
                    .collect(),
            })
            .collect(),
        encoder,
        timings: Some(pb::Timings {
            repair_ms: t.repair,
            tokenize_ms: t.tokenize,
            queue_ms: t.queue,
            encode_ms: t.encode,
            search_ms: t.search,
            total_ms: t.total,
            filter_ms: t.filter,
            vote_ms: t.vote,
        }),
        routed_to,
        encoders,
        fusion,
        filter: out.filter.map(|f| pb::FilterReport {
            admitted: f.admitted,
            strategy: f.strategy.as_str().to_string(),
        }),
    }
}

/// Serialised name of a serde enum (`Role`, `Metric`), as `/info` shows it.
pub(super) fn enum_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The data of `GET /info`, as a message.
pub(super) fn info(state: &AppState) -> pb::InfoResponse {
    let snapshot = state.registry.snapshot();
    let encoders: Vec<pb::EncoderInfo> = snapshot
        .encoders
        .values()
        .map(|e| {
            let m = e.encoder().manifest();
            pb::EncoderInfo {
                name: m.name.clone(),
                version: m.version.clone(),
                role: enum_name(&m.role),
                dimension: to_u32(m.dimension),
                fingerprint: m.fingerprint.clone(),
                aligned_to: m.aligned_to.clone(),
                execution_provider: e.encoder().provider().to_string(),
                loaded_at: e.loaded_at_rfc3339(),
                load_seconds: e.load_seconds,
                compatibility_override: e.compatibility_override.clone(),
            }
        })
        .collect();
    let mut providers: Vec<String> = encoders
        .iter()
        .map(|e| e.execution_provider.clone())
        .collect();
    providers.sort();
    providers.dedup();
    let served = state.corpus();
    let index = served.as_ref().map(|c| {
        let i = &c.index;
        let m = i.manifest();
        pb::IndexInfo {
            documents: i.len() as u64,
            dimension: to_u32(m.dimension),
            metric: enum_name(&m.metric),
            document_encoder: m.encoder_name.clone(),
            document_encoder_fingerprint: m.encoder_fingerprint.clone(),
            hnsw_m: to_u32(m.hnsw.m),
            hnsw_ef_construction: to_u32(m.hnsw.ef_construction),
            hnsw_ef_search: to_u32(state.limits.default_ef.unwrap_or_else(|| i.default_ef())),
        }
    });
    let l = &state.limits;
    pb::InfoResponse {
        version: env!("CARGO_PKG_VERSION").to_string(),
        ready: state.is_ready(),
        uptime_seconds: state.started.elapsed().as_secs(),
        execution_providers: providers,
        index,
        encoders,
        aliases: snapshot.aliases.clone().into_iter().collect(),
        limits: Some(pb::Limits {
            max_k: to_u32(l.max_k),
            max_queries_per_request: to_u32(l.max_queries_per_request),
            max_query_chars: to_u32(l.max_query_chars),
            max_body_bytes: l.max_body_bytes as u64,
            max_in_flight: to_u32(l.max_in_flight),
            queue_capacity: to_u32(l.queue_capacity),
            request_timeout_ms: l.request_timeout_ms,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_map_to_grpc_codes_with_message_and_reason() {
        let cases = [
            (
                ApiError::invalid("queries[0]: text must not be empty"),
                Code::InvalidArgument,
            ),
            (
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", "x"),
                Code::InvalidArgument,
            ),
            (
                ApiError::not_found("unknown_encoder", "no encoder"),
                Code::NotFound,
            ),
            (ApiError::overloaded("busy"), Code::ResourceExhausted),
            (ApiError::not_ready("loading"), Code::Unavailable),
            (
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "key"),
                Code::Unauthenticated,
            ),
            (
                ApiError::new(StatusCode::CONFLICT, "conflict", "c"),
                Code::FailedPrecondition,
            ),
            (
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", "big"),
                Code::OutOfRange,
            ),
            (ApiError::internal("boom"), Code::Internal),
        ];
        for (e, code) in cases {
            let s = to_status(&e);
            assert_eq!(s.code(), code, "{e:?}");
            assert_eq!(s.message(), e.message);
            assert_eq!(
                s.metadata()
                    .get(ERROR_CODE_KEY)
                    .and_then(|v| v.to_str().ok()),
                Some(e.code)
            );
        }
    }

    #[test]
    fn search_request_default_k_empty_encoder_and_fusion() {
        use crate::repair::{RepairFusion, RepairMode};
        let p = search_request(pb::SearchRequest {
            queries: vec!["a".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(p.fusion, None, "no names, no fusion");
        let p = p.params;
        assert_eq!(p.k, DEFAULT_K);
        assert_eq!((p.encoder, p.repair, p.repair_fusion), (None, None, None));
        let p = search_request(pb::SearchRequest {
            queries: vec!["a".into()],
            k: Some(0),
            encoder: "minilm".into(),
            ef: Some(64),
            repair: "on".into(),
            repair_fusion: "repaired".into(),
            fusion: vec!["default".into(), "typo".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            p.fusion,
            Some(vec!["default".to_string(), "typo".to_string()])
        );
        let p = p.params;
        assert_eq!(
            (p.k, p.encoder.as_deref(), p.ef),
            (0, Some("minilm"), Some(64))
        );
        assert_eq!(
            (p.repair, p.repair_fusion),
            (Some(RepairMode::On), Some(RepairFusion::Repaired))
        );
        let err = search_request(pb::SearchRequest {
            queries: vec!["a".into()],
            repair: "sometimes".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.message.contains("repair"), "{}", err.message);
    }

    #[test]
    fn a_protobuf_filter_means_what_its_json_shape_means() {
        use crate::query::Filter;
        use pb::condition::ConditionOneOf as C;
        use pb::r#match::MatchValue as M;
        let field =
            |key: &str, m: Option<M>, range: Option<pb::Range>, dt: Option<pb::DatetimeRange>| {
                pb::Condition {
                    condition_one_of: Some(C::Field(pb::FieldCondition {
                        key: key.into(),
                        r#match: m.map(|m| pb::Match {
                            match_value: Some(m),
                        }),
                        range,
                        datetime_range: dt,
                        ..Default::default()
                    })),
                }
            };
        // Integer bounds past 2^53, which a double cannot hold.
        let integers =
            |key: &str, range: pb::IntegerRange, also: Option<pb::Range>| pb::Condition {
                condition_one_of: Some(C::Field(pb::FieldCondition {
                    key: key.into(),
                    integer_range: Some(range),
                    range: also,
                    ..Default::default()
                })),
            };
        let f = pb::Filter {
            must: vec![
                field("lang", Some(M::Keyword("en".into())), None, None),
                field(
                    "year",
                    None,
                    Some(pb::Range {
                        gte: Some(2020.0),
                        lt: Some(2024.0),
                        ..Default::default()
                    }),
                    None,
                ),
                integers(
                    "account",
                    pb::IntegerRange {
                        gt: Some(1_100_000_000_000_000_001),
                        lte: Some(i64::MAX),
                        ..Default::default()
                    },
                    None,
                ),
                pb::Condition {
                    condition_one_of: Some(C::Filter(pb::Filter {
                        should: vec![field(
                            "tags",
                            Some(M::Keywords(pb::RepeatedStrings {
                                strings: vec!["a".into(), "b".into()],
                            })),
                            None,
                            None,
                        )],
                        ..Default::default()
                    })),
                },
            ],
            must_not: vec![
                field(
                    "n",
                    Some(M::ExceptIntegers(pb::RepeatedIntegers {
                        integers: vec![1, 2],
                    })),
                    None,
                    None,
                ),
                field(
                    "at",
                    None,
                    None,
                    Some(pb::DatetimeRange {
                        gt: "2024-01-01T00:00:00Z".into(),
                        ..Default::default()
                    }),
                ),
                pb::Condition {
                    condition_one_of: Some(C::IsNull(pb::IsNullCondition { key: "x".into() })),
                },
                pb::Condition {
                    condition_one_of: Some(C::HasId(pb::HasIdCondition {
                        ids: vec!["d1".into()],
                    })),
                },
            ],
            min_should: Some(pb::MinShould {
                conditions: vec![pb::Condition {
                    condition_one_of: Some(C::IsEmpty(pb::IsEmptyCondition { key: "y".into() })),
                }],
                min_count: 1,
            }),
            ..Default::default()
        };
        let json = serde_json::json!({
            "must": [{"key": "lang", "match": {"value": "en"}},
                     {"key": "year", "range": {"gte": 2020.0, "lt": 2024.0}},
                     {"key": "account", "range": {"gt": 1_100_000_000_000_000_001_i64, "lte": i64::MAX}},
                     {"should": [{"key": "tags", "match": {"any": ["a", "b"]}}]}],
            "must_not": [{"key": "n", "match": {"except": [1, 2]}},
                         {"key": "at", "range": {"gt": "2024-01-01T00:00:00Z"}},
                         {"is_null": {"key": "x"}}, {"has_id": ["d1"]}],
            "min_should": {"conditions": [{"is_empty": {"key": "y"}}], "min_count": 1}
        });
        let req = search_request(pb::SearchRequest {
            queries: vec!["q".into()],
            filter: Some(f),
            with_metadata: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            req.params.filter,
            Some(Filter::parse(&json, "filter").unwrap())
        );
        assert!(req.params.with_metadata);
        // A bad filter is refused with the JSON path, as over HTTP.
        let bad = pb::Filter {
            must: vec![field(
                "at",
                None,
                None,
                Some(pb::DatetimeRange {
                    gt: "soon".into(),
                    ..Default::default()
                }),
            )],
            ..Default::default()
        };
        let refused = |bad: pb::Filter| {
            search_request(pb::SearchRequest {
                queries: vec!["q".into()],
                filter: Some(bad),
                ..Default::default()
            })
            .unwrap_err()
        };
        let e = refused(bad);
        assert_eq!(
            (e.code, e.param.as_deref()),
            ("invalid_filter", Some("filter.must[0].range.gt"))
        );
        // Two kinds of range in one condition are refused, not merged.
        let e = refused(pb::Filter {
            must: vec![integers(
                "account",
                pb::IntegerRange {
                    gt: Some(1),
                    ..Default::default()
                },
                Some(pb::Range {
                    lt: Some(2.5),
                    ..Default::default()
                }),
            )],
            ..Default::default()
        });
        assert_eq!(
            (e.code, e.param.as_deref()),
            ("invalid_filter", Some("filter.must[0].range"))
        );
        // A bound JSON cannot hold (NaN, infinity) is named as such, at its path.
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let bad = pb::Filter {
                should: vec![pb::Condition {
                    condition_one_of: Some(C::Filter(pb::Filter {
                        must: vec![field(
                            "year",
                            None,
                            Some(pb::Range {
                                gte: Some(1.0),
                                lte: Some(x),
                                ..Default::default()
                            }),
                            None,
                        )],
                        ..Default::default()
                    })),
                }],
                ..Default::default()
            };
            let e = refused(bad);
            assert_eq!(
                (e.code, e.param.as_deref()),
                ("invalid_filter", Some("filter.should[0].must[0].range.lte"))
            );
            assert!(e.message.contains("finite number"), "{}", e.message);
        }
    }
}
