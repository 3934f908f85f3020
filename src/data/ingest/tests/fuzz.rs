//! No decoder panics on any input: random bytes, and valid bodies with random bytes flipped,
//! cut or spliced, fed to every decoder (a bounded, seeded loop). The remote-write wire decoder
//! must also accept exactly what prost accepts.

use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use super::otlp_json::JSON_REQUEST;
use super::remote_write::{encode, series};
use crate::data::seam::Protocol;
use crate::data::ingest::exposition::{TargetLabels, to_batch};
use crate::data::ingest::{body, otlp, otlp_metrics_json, remote_write, remote_write_wire};

const ROUNDS: usize = 3000;
const LIMIT: usize = 1 << 20;

fn seeds() -> Vec<Vec<u8>> {
    let protobuf = otlp_metrics_json::decode(JSON_REQUEST.as_bytes()).expect("valid").encode_to_vec();
    let bucket = |le: &'static str, v: f64| series("h_bucket", &[("job", "j"), ("le", le)], &[(v, 1)]);
    let remote = encode(vec![series("up", &[("job", "j"), ("instance", "a:1")], &[(1.0, 1), (0.0, 2)]), bucket("1", 1.0), bucket("+Inf", 2.0)]);
    let exposition = b"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\nup{a=\"b\"} 1 1700000000000\n".to_vec();
    vec![JSON_REQUEST.as_bytes().to_vec(), protobuf, remote, exposition]
}

/// `seed` with random bytes flipped, cut, spliced in, or replaced by random bytes.
pub(super) fn mutate(rng: &mut StdRng, seed: &[u8]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    match rng.random_range(0..4) {
        0 => {
            for _ in 0..rng.random_range(1..8) {
                if bytes.is_empty() {
                    break;
                }
                let at = rng.random_range(0..bytes.len());
                bytes[at] = rng.random();
            }
        }
        1 => bytes.truncate(rng.random_range(0..=bytes.len())),
        2 => {
            let at = rng.random_range(0..=bytes.len());
            let mut noise = vec![0u8; rng.random_range(1..32)];
            rng.fill_bytes(&mut noise);
            bytes.splice(at..at, noise);
        }
        _ => {
            bytes = vec![0u8; rng.random_range(0..256)];
            rng.fill_bytes(&mut bytes);
        }
    }
    bytes
}

fn every_decoder(input: &[u8]) {
    if let Ok(request) = otlp::decode_protobuf(input) {
        let _ = otlp::map_request(&request, 0);
    }
    if let Ok(request) = otlp_metrics_json::decode(input) {
        let _ = otlp::map_request(&request, 0);
    }
    let _ = remote_write::decode(input, LIMIT, 0);
    // The protobuf inside a snappy body, mutated after compression would mostly fail the
    // checksum-free block format early; also feed the raw bytes to the message decoder.
    let by_prost = remote_write::prompb::WriteRequest::decode(input);
    let mut by_wire = 0;
    let walked = remote_write_wire::walk(input, |_, series| by_wire += series.labels.len() + series.samples.len());
    let prost_count = by_prost.as_ref().ok().map(|r| r.timeseries.iter().map(|s| s.labels.len() + s.samples.len()).sum::<usize>());
    assert_eq!(walked.is_ok().then_some(by_wire), prost_count, "the wire decoder accepts what prost accepts: {input:02x?}");
    if let Ok(request) = by_prost {
        let _ = remote_write::map_request(request, 0);
    }
    let _ = to_batch(input, &TargetLabels::new("j", Some("i:1"), &Default::default()), Protocol::Push, 0);
    let _ = body::gunzip(input, LIMIT);
}

#[test]
fn no_decoder_panics_on_random_or_mutated_input() {
    let mut rng = StdRng::seed_from_u64(0x5eed_1e57);
    let seeds = seeds();
    for seed in &seeds {
        every_decoder(seed);
    }
    for round in 0..ROUNDS {
        let seed = &seeds[round % seeds.len()];
        every_decoder(&mutate(&mut rng, seed));
        // Remote-write bodies are compressed: mutate the message, then compress it.
        if round % seeds.len() == 2 {
            let raw = remote_write::decompress(seed, LIMIT).expect("valid seed");
            let mutated = mutate(&mut rng, &raw);
            let compressed = snap::raw::Encoder::new().compress_vec(&mutated).expect("compresses");
            let _ = remote_write::decode(&compressed, LIMIT, 0);
        }
    }
}
