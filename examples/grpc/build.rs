//! Generates the `demo.v1.Echo` service's server and client stubs from a
//! description in Rust (tonic-build's `manual` module): no `.proto` file,
//! no `protoc`. The messages are written by hand with prost's derive
//! (`src/echo.rs`).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let echo = tonic_build::manual::Service::builder()
        .name("Echo")
        .package("demo.v1")
        .method(
            tonic_build::manual::Method::builder()
                .name("say")
                .route_name("Say")
                .input_type("crate::echo::SayRequest")
                .output_type("crate::echo::SayReply")
                .codec_path("tonic_prost::ProstCodec")
                .build(),
        )
        .build();
    tonic_build::manual::Builder::new()
        .build_transport(false)
        .compile(&[echo]);
}
