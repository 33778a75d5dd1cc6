//! Ray jobs through krayne: upload throughput of a working dir's package
//! (a stored zip of incompressible files) through krayne's REST `PUT
//! …/packages/{package}` (both upstream modes) and its gRPC
//! `UploadPackage` stream, each beside a direct `PUT` to the head's
//! dashboard stand-in (as Ray's own client sends it), measured in the same
//! run.
//!
//! ```sh
//! cargo build --release -p krayne-server
//! cargo bench -p krayne-tests --bench jobs [-- --mib 50 --runs 5]
//! ```
//!
//! Uses `TEST_DATABASE_URL` for the audit log (else a throwaway Postgres).
//! Prints a table and one JSON line.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::panic,
    missing_docs
)]

use std::{io::Write as _, time::Instant};

use clap::Parser;
use comfy_table::{Table, presets::ASCII_MARKDOWN};
use k8s_openapi::api::core::v1::Pod;
use krayne_proto::v1::{self as pb, upload_package_request};
use krayne_tests::load::BenchEnv;
use serde_json::json;

#[derive(Parser)]
#[command(about = "Working-dir upload throughput through krayne against a direct PUT")]
struct Args {
    /// MiB of files in the working dir.
    #[arg(long, default_value_t = 50)]
    mib: usize,
    /// Uploads timed on each path (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// A stored zip of `mib` MiB of random files (1 MiB each), as Ray packs a
/// working dir.
fn package(mib: usize) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut rng = fastrand::Rng::with_seed(23);
    for i in 0..mib {
        zip.start_file(format!("data/part-{i:03}.bin"), stored).unwrap();
        let chunk: Vec<u8> = (0..1024 * 1024).map(|_| rng.u8(..)).collect();
        zip.write_all(&chunk).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// MiB/s of `runs` uploads made by `upload` (the median).
async fn timed<F, Fut>(runs: usize, size: usize, mut upload: F) -> f64
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut rates = Vec::with_capacity(runs);
    for run in 0..runs {
        let started = Instant::now();
        upload(run).await;
        rates.push(size as f64 / (1024.0 * 1024.0) / started.elapsed().as_secs_f64());
    }
    median(rates)
}

/// The package's name on every path and run: each upload replaces the
/// last (the head's store is capped at 512 MiB, as Ray's GCS is).
fn name(_path: &str, _run: usize) -> String {
    "_ray_pkg_00000000000000b5.zip".to_owned()
}

async fn grpc_upload(api: &str, token: &str, package: &str, bytes: &bytes::Bytes) {
    let mut client = krayne_tests::Grpc::connect(&format!("http://{api}"), token).await.jobs;
    let first = pb::UploadPackageRequest {
        kind: Some(upload_package_request::Kind::Package(pb::PackageRef {
            namespace: "bench-00".into(),
            name: "jobs".into(),
            package: package.into(),
        })),
    };
    let chunks: Vec<pb::UploadPackageRequest> = (0..bytes.len())
        .step_by(256 * 1024)
        .map(|at| pb::UploadPackageRequest {
            kind: Some(upload_package_request::Kind::Data(
                bytes.slice(at..(at + 256 * 1024).min(bytes.len())).to_vec(),
            )),
        })
        .collect();
    let messages = futures::stream::iter(std::iter::once(first).chain(chunks));
    client.upload_package(messages).await.unwrap();
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let bench = BenchEnv::start(1, |_| {}).await;
    let env = &bench.env;
    let direct_server = env.spawn_server(&["--service-upstream", "direct"]).await;
    let (pf_api, direct_api) = (env.server.api.to_string(), direct_server.api.to_string());
    let http = &bench.http;
    let token = bench.token.clone();
    bench.ready_cluster("jobs").await;
    let kube = krayne_server::k8s::client_for_url(&env.sandbox.url()).unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(kube, "bench-00");
    let head = pods
        .list(&kube::api::ListParams::default().labels("ray.io/cluster=jobs,ray.io/node-type=head"))
        .await
        .unwrap()
        .items
        .remove(0);
    let ip = head.status.and_then(|s| s.pod_ip).unwrap();
    let zip = bytes::Bytes::from(package(args.mib));
    let size = zip.len();
    eprintln!("package of {} MiB", size / (1024 * 1024));

    let put = |url: String, bearer: Option<String>| {
        let (http, zip) = (http.clone(), zip.clone());
        async move {
            let mut request = http.put(url).body(zip);
            if let Some(token) = bearer {
                request = request.bearer_auth(token);
            }
            let answer = request.send().await.unwrap();
            assert!(answer.status().is_success(), "{}", answer.status());
        }
    };
    let rest = |api: &str, run: usize| {
        format!(
            "http://{api}/v1/namespaces/bench-00/clusters/jobs/packages/{}",
            name(api, run)
        )
    };
    let direct = timed(args.runs, size, |run| {
        put(
            format!("http://{ip}:8265/api/packages/gcs/{}", name("direct", run)),
            None,
        )
    })
    .await;
    let rest_pf = timed(args.runs, size, |run| put(rest(&pf_api, run), Some(token.clone()))).await;
    let rest_direct = timed(args.runs, size, |run| put(rest(&direct_api, run), Some(token.clone()))).await;
    let grpc_pf = timed(args.runs, size, |run| {
        let (api, token, zip) = (pf_api.clone(), token.clone(), zip.clone());
        async move { grpc_upload(&api, &token, &name("grpc-pf", run), &zip).await }
    })
    .await;
    let grpc_direct = timed(args.runs, size, |run| {
        let (api, token, zip) = (direct_api.clone(), token.clone(), zip.clone());
        async move { grpc_upload(&api, &token, &name("grpc-direct", run), &zip).await }
    })
    .await;

    let mut table = Table::new();
    table
        .load_style(ASCII_MARKDOWN)
        .set_header(["upload of the package", "MiB/s (median)", "× direct PUT"]);
    let rows = [
        ("direct PUT to the dashboard stand-in (as Ray's client)", direct),
        ("krayne REST PUT, port-forward upstream", rest_pf),
        ("krayne REST PUT, direct upstream", rest_direct),
        ("krayne gRPC UploadPackage, port-forward upstream", grpc_pf),
        ("krayne gRPC UploadPackage, direct upstream", grpc_direct),
    ];
    for (path, rate) in rows {
        table.add_row([path.to_owned(), format!("{rate:.0}"), format!("{:.2}", rate / direct)]);
    }
    println!("{table}\n");
    let json = json!({
        "package_mib": size as f64 / (1024.0 * 1024.0),
        "mib_s": rows.iter().map(|(p, r)| json!({"path": p, "mib_s": r})).collect::<Vec<_>>(),
    });
    println!("{json}");
    drop(direct_server);
}
