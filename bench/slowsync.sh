# Sourced by the bench scripts that run servers under ../shared/slowsync:
# slowsync_so prints the shim's path, building it under target/ when the
# shared directory has no build of it (that directory may be read-only).
# Call it from the repository's root.
slowsync_so() {
    local src=../shared/slowsync out=target/slowsync
    if [ -f "$src/slowsync.so" ] && [ "$src/slowsync.so" -nt "$src/slowsync.c" ]; then
        echo "$PWD/$src/slowsync.so"
        return
    fi
    if [ ! "$out/slowsync.so" -nt "$src/slowsync.c" ]; then
        echo "building slowsync.so into $out..." >&2
        mkdir -p "$out"
        OUT_DIR=$PWD/$out "$src/build.sh" >/dev/null
    fi
    echo "$PWD/$out/slowsync.so"
}
