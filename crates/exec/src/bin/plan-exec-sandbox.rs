//! `plan-exec-sandbox`: the helper process plan-exec starts for every
//! command. It supervises the command, confines itself as told and then
//! executes the shell. It is not meant to be run by hand.

fn main() -> std::process::ExitCode {
    plan_exec::helper::main()
}
