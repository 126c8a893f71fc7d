fn main() {
    eprintln!("p4netem-switch: data plane under construction");
}
