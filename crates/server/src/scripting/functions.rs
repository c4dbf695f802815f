//! FUNCTION's libraries as the server runs them: each library's code, the
//! functions it registered (name, description, flags, callback) and the Lua
//! VM they live in, which is not EVAL's (FUNCTION FLUSH starts a fresh one,
//! SCRIPT FLUSH leaves it alone), as in Redis 7.
//!
//! A library's code starts with `#!lua name=<library>`; loading it runs the
//! rest once in a sandbox where only `redis.register_function`, `redis.log`
//! and the version exist (see `vm::Vm::load_library`). What the engine logs
//! and checkpoints is the code alone (`durakv_engine::functions`); this
//! registry is rebuilt from it at start-up.

use super::vm::{Kind, Registration, Vm};
use super::RunState;
use bytes::Bytes;
use durakv_protocol::Frame;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// FUNCTION LOAD stops a library whose top level runs longer (Redis's).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

pub const BAD_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Function flags, in the order FUNCTION LIST reports them.
pub mod flags {
    pub const NO_WRITES: u8 = 1;
    pub const ALLOW_OOM: u8 = 1 << 1;
    pub const ALLOW_STALE: u8 = 1 << 2;
    pub const NO_CLUSTER: u8 = 1 << 3;
    pub const ALLOW_CROSS_SLOT_KEYS: u8 = 1 << 4;

    pub const NAMES: [(u8, &str); 5] = [
        (NO_WRITES, "no-writes"),
        (ALLOW_OOM, "allow-oom"),
        (ALLOW_STALE, "allow-stale"),
        (NO_CLUSTER, "no-cluster"),
        (ALLOW_CROSS_SLOT_KEYS, "allow-cross-slot-keys"),
    ];
}

/// The bit of a flag name (case-insensitive, as Redis compares them).
pub fn flag_bit(name: &[u8]) -> Option<u8> {
    flags::NAMES
        .iter()
        .find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|(bit, _)| *bit)
}

/// Library and function names: letters, digits and underscores, at least one.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

pub struct Function {
    pub name: String,
    pub description: Option<Bytes>,
    pub flags: u8,
    callback: Arc<mlua::RegistryKey>,
}

impl Function {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Where its VM keeps the callback (`Vm::registered`).
    pub fn callback(&self) -> Arc<mlua::RegistryKey> {
        self.callback.clone()
    }
}

pub struct Library {
    pub name: String,
    /// The whole code, shebang line included, as FUNCTION LOAD got it.
    pub code: Bytes,
    pub functions: Vec<Function>,
}

/// What the shebang line says.
pub struct Metadata {
    pub name: String,
    /// Where the code after the shebang line starts (at its newline, so
    /// line numbers stay the user's).
    body_at: usize,
}

/// Parses and checks `#!<engine> name=<library>`, with Redis's errors.
pub fn metadata(code: &[u8]) -> Result<Metadata, Frame> {
    let err = |m: &str| Frame::error(format!("ERR {m}"));
    if !code.starts_with(b"#!") {
        return Err(err("Missing library metadata"));
    }
    let Some(body_at) = code.iter().position(|&c| c == b'\n') else {
        return Err(err("Invalid library metadata"));
    };
    let parts = durakv_protocol::request::split_args(&code[..body_at])
        .filter(|p| !p.is_empty())
        .ok_or_else(|| err("Invalid library metadata"))?;
    let engine = String::from_utf8_lossy(&parts[0][2..]).into_owned();
    let mut name = None;
    for part in &parts[1..] {
        let text = String::from_utf8_lossy(part);
        match text.get(..5) {
            Some(prefix) if prefix.eq_ignore_ascii_case("name=") => {
                if name.is_some() {
                    return Err(err(
                        "Invalid metadata value, name argument was given multiple times",
                    ));
                }
                name = Some(text[5..].to_string());
            }
            _ => return Err(err(&format!("Invalid metadata value given: {text}"))),
        }
    }
    let name = name.ok_or_else(|| err("Library name was not given"))?;
    if !valid_name(&name) {
        return Err(err(BAD_NAME));
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(err(&format!("Engine '{engine}' not found")));
    }
    Ok(Metadata { name, body_at })
}

#[derive(Default)]
pub struct Registry {
    /// Created on first use; FUNCTION FLUSH drops it.
    vm: Option<Vm>,
    libraries: BTreeMap<String, Library>,
    /// Lower-case function name → its library (function names are
    /// case-insensitive across libraries, as in Redis).
    index: HashMap<String, String>,
}

impl Registry {
    pub fn vm(&mut self, run: &Arc<RunState>) -> Result<&mut Vm, Frame> {
        if self.vm.is_none() {
            let v = Vm::new(run.clone(), Kind::Functions)
                .map_err(|e| Frame::error(format!("ERR cannot start the Lua VM: {e}")))?;
            self.vm = Some(v);
        }
        self.vm
            .as_mut()
            .ok_or_else(|| Frame::error("ERR cannot start the Lua VM"))
    }

    /// Compiles `code` and runs its top level (for at most `timeout`),
    /// returning the library it defines without installing it.
    pub fn compile(
        &mut self,
        run: &Arc<RunState>,
        code: &Bytes,
        timeout: Option<Duration>,
    ) -> Result<Library, Frame> {
        let meta = metadata(code)?;
        let registered = self.vm(run)?.load_library(&code[meta.body_at..], timeout)?;
        if registered.is_empty() {
            return Err(Frame::error("ERR No functions registered"));
        }
        Ok(Library {
            name: meta.name,
            code: code.clone(),
            functions: registered.into_iter().map(function).collect(),
        })
    }

    pub fn library(&self, name: &str) -> Option<&Library> {
        self.libraries.get(name)
    }

    /// In name order.
    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libraries.values()
    }

    /// Redis's error if one of `lib`'s functions is already registered by
    /// a library other than those named in `replaced`.
    pub fn collision(&self, lib: &Library, replaced: &[&str]) -> Option<Frame> {
        lib.functions.iter().find_map(|f| {
            let owner = self.index.get(&f.name.to_ascii_lowercase())?;
            (!replaced.contains(&owner.as_str()))
                .then(|| Frame::error(format!("ERR Function {} already exists", f.name)))
        })
    }

    /// Installs `lib`, replacing a library of the same name.
    pub fn install(&mut self, lib: Library) {
        self.remove(&lib.name.clone());
        for f in &lib.functions {
            self.index
                .insert(f.name.to_ascii_lowercase(), lib.name.clone());
        }
        self.libraries.insert(lib.name.clone(), lib);
    }

    pub fn remove(&mut self, name: &str) -> Option<Library> {
        let lib = self.libraries.remove(name)?;
        for f in &lib.functions {
            self.index.remove(&f.name.to_ascii_lowercase());
        }
        Some(lib)
    }

    /// FUNCTION FLUSH: every library, and the VM they lived in.
    pub fn flush(&mut self) {
        self.clear();
        self.vm = None;
    }

    /// Every library; the VM stays (FUNCTION RESTORE FLUSH installs
    /// libraries already compiled in it).
    pub fn clear(&mut self) {
        self.libraries.clear();
        self.index.clear();
    }

    /// A function by name, case-insensitively.
    pub fn find(&self, name: &[u8]) -> Option<&Function> {
        let key = String::from_utf8_lossy(name).to_ascii_lowercase();
        let lib = self.libraries.get(self.index.get(&key)?)?;
        lib.functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(&key))
    }

    /// Memory of the functions' Lua VM, if it exists.
    pub fn vm_used_memory(&self) -> usize {
        self.vm.as_ref().map_or(0, Vm::used_memory)
    }

    /// What the registry keeps beside the VM: each library's code and
    /// name, each function's name and description, and the index.
    pub fn metadata_bytes(&self) -> usize {
        self.libraries
            .values()
            .map(|l| {
                let functions: usize = l
                    .functions
                    .iter()
                    .map(|f| {
                        2 * f.name.len()
                            + f.description.as_ref().map_or(0, Bytes::len)
                            + std::mem::size_of::<Function>()
                            + 64
                    })
                    .sum();
                l.code.len() + 2 * l.name.len() + functions
            })
            .sum()
    }

    /// (libraries, functions).
    pub fn counts(&self) -> (usize, usize) {
        (self.libraries.len(), self.index.len())
    }
}

fn function(r: Registration) -> Function {
    Function {
        name: r.name,
        description: r.description,
        flags: r.flags,
        callback: Arc::new(r.callback),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(code: &str) -> String {
        match metadata(code.as_bytes()) {
            Err(Frame::Error(e)) => String::from_utf8_lossy(&e).into_owned(),
            Err(other) => format!("{other:?}"),
            Ok(m) => format!("ok {}", m.name),
        }
    }

    #[test]
    fn shebang_metadata_as_redis_reads_it() {
        assert_eq!(error_of("#!lua name=lib\nbody"), "ok lib");
        assert_eq!(error_of("#!LUA name=\"quoted\"\n"), "ok quoted");
        assert_eq!(error_of("return 1"), "ERR Missing library metadata");
        assert_eq!(error_of("#!lua name=x"), "ERR Invalid library metadata");
        assert_eq!(error_of("#!lua\n"), "ERR Library name was not given");
        assert_eq!(
            error_of("#!lua name=a name=b\n"),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(
            error_of("#!lua name=a foo=bar\n"),
            "ERR Invalid metadata value given: foo=bar"
        );
        assert_eq!(error_of("#! name=a\n"), "ERR Engine '' not found");
        assert_eq!(error_of("#!js name=a\n"), "ERR Engine 'js' not found");
        assert_eq!(error_of("#!lua name=a-b\n"), format!("ERR {BAD_NAME}"));
    }

    #[test]
    fn flags_are_case_insensitive() {
        assert_eq!(flag_bit(b"No-Writes"), Some(flags::NO_WRITES));
        assert_eq!(
            flag_bit(b"allow-cross-slot-keys"),
            Some(flags::ALLOW_CROSS_SLOT_KEYS)
        );
        assert_eq!(flag_bit(b"unknown"), None);
    }
}
