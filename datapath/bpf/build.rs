//! Builds the BPF object and its Rust skeleton. `vmlinux.h` (every kernel type, for the BPF C
//! code) is generated here from the build machine's BTF with bpftool, so no kernel headers are
//! needed; the object is CO-RE and runs on other kernels with BTF.

use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;
use std::process::Command;

const SRC: &str = "src/bpf/ccp_bpf.bpf.c";
const BTF: &str = "/sys/kernel/btf/vmlinux";

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed={SRC}");
    let btf = std::env::var("CCP_BPF_BTF").unwrap_or_else(|_| BTF.to_string());
    println!("cargo:rerun-if-env-changed=CCP_BPF_BTF");
    if !std::path::Path::new(&btf).exists() {
        panic!(
            "{btf} does not exist: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF), which the BPF \
             datapath needs both to build (vmlinux.h) and to run (struct_ops). Build on a kernel \
             with BTF, or point CCP_BPF_BTF at a vmlinux file with BTF"
        );
    }
    let vmlinux = out.join("vmlinux.h");
    let dump = Command::new("bpftool")
        .args(["btf", "dump", "file", &btf, "format", "c"])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run bpftool ({e}); install it (Debian: apt-get install bpftool, or make deps)")
        });
    if !dump.status.success() {
        panic!(
            "bpftool btf dump of {btf} failed: {}",
            String::from_utf8_lossy(&dump.stderr)
        );
    }
    std::fs::write(&vmlinux, &dump.stdout).expect("write vmlinux.h");

    let skel = out.join("ccp_bpf.skel.rs");
    SkeletonBuilder::new()
        .source(SRC)
        .clang_args([
            std::ffi::OsString::from("-I"),
            out.clone().into_os_string(),
            "-Wall".into(),
            "-O2".into(),
            // atomic fetch-and-add (socket ids) needs BPF ISA v3 (kernel 5.12+)
            "-mcpu=v3".into(),
        ])
        .build_and_generate(&skel)
        .unwrap_or_else(|e| panic!("building {SRC} failed (is clang installed? make deps): {e:#}"));
}
