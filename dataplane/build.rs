//! Generates the P4Runtime gRPC code (messages, server and client stubs).
//!
//! The protocol definitions come from the PyPI `p4runtime` package: `proto/dump_fds.py` asks that
//! package's generated Python modules for their descriptors and writes them as one
//! FileDescriptorSet into OUT_DIR, which tonic-prost-build turns into Rust. So the repository holds
//! no copy of the .proto files and the build needs no protoc; the P4Runtime version is whatever
//! `make setup` installed into `.venv`.
//!
//! It also generates the pipeline schema from the checked-in P4Info (`generate_contract`).
//!
//! The interpreter is `$P4NETEM_PYTHON`, else `../.venv/bin/python` (relative to this crate),
//! else `python3` from PATH.

use std::path::{Path, PathBuf};
use std::process::Command;

use prost::Message;

fn main() {
    if let Err(msg) = run() {
        // Cargo shows a failed build script's stderr; a plain message reads better than a panic.
        eprintln!("\nerror: {msg}\n");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(env("OUT_DIR")?);
    let script = manifest_dir.join("proto").join("dump_fds.py");

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-env-changed=P4NETEM_PYTHON");

    let python = choose_python(&manifest_dir);
    let fds_path = out_dir.join("p4runtime_fds.bin");
    let output = Command::new(&python).arg(&script).arg(&fds_path).output().map_err(|e| {
        format!(
            "cannot run the Python interpreter {} ({e}).\n\
                 Run `make setup` to create .venv with the p4runtime package, or set P4NETEM_PYTHON.",
            python.display()
        )
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        // Exit status 3: the script already said which package is missing and how to get it.
        if output.status.code() == Some(3) {
            return Err(stderr);
        }
        return Err(format!(
            "{} {} failed ({}):\n{stderr}\nRun `make setup` (it installs the PyPI packages p4runtime and \
             grpcio into .venv), or set P4NETEM_PYTHON to an interpreter that has them.",
            python.display(),
            script.display(),
            output.status,
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let version = lines.next().unwrap_or("").trim().to_string();
    if let Some(module) = lines.next() {
        // Regenerate when the installed package changes (e.g. another p4runtime version).
        println!("cargo:rerun-if-changed={}", module.trim());
    }
    // The package version is the version of the protos we compiled; the server reports it in
    // Capabilities.
    println!("cargo:rustc-env=P4RUNTIME_PROTO_VERSION={version}");

    let bytes = std::fs::read(&fds_path).map_err(|e| format!("cannot read {}: {e}", fds_path.display()))?;
    let fds = prost_types::FileDescriptorSet::decode(bytes.as_slice())
        .map_err(|e| format!("{} is not a FileDescriptorSet: {e}", fds_path.display()))?;

    generate_contract(&python, &manifest_dir, &out_dir)?;

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .include_file("p4runtime_proto.rs")
        .compile_fds(fds)
        .map_err(|e| format!("generating Rust code from the P4Runtime descriptors failed: {e}"))?;
    Ok(())
}

/// The pipeline schema (ids, params, widths, sizes, drop reasons) from the checked-in P4Info, the
/// one definition of it: `proto/gen_contract.py` writes OUT_DIR/contract_gen.rs, which
/// src/contract.rs includes.
fn generate_contract(python: &Path, manifest_dir: &Path, out_dir: &Path) -> Result<(), String> {
    let script = manifest_dir.join("proto").join("gen_contract.py");
    let p4info = manifest_dir.join("..").join("p4src").join("p4netem.p4info.txtpb");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-changed={}", p4info.display());
    println!("cargo:rerun-if-changed={}/../control-plane/p4netem/p4rt/proto.py", manifest_dir.display());
    let output = Command::new(python)
        .arg(&script)
        .arg(&p4info)
        .arg(out_dir.join("contract_gen.rs"))
        .output()
        .map_err(|e| format!("cannot run {} ({e})", python.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} {} failed ({}):\n{}",
            python.display(),
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(())
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("cargo did not set {name}"))
}

fn choose_python(manifest_dir: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("P4NETEM_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv = manifest_dir.join("..").join(".venv").join("bin").join("python");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}
