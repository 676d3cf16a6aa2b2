# Sourced by scripts/build-small and scripts/test: the C runtime a static
# musl build links against where the pinned nightly (scripts/build-small)
# rebuilds the standard library for a target it has no standard library
# for. `static_runtime TARGET` sets `runtime_flags` (rustc flags) and
# returns 0, or says why not and returns 1; the working directory must be
# the repository's root.
#
#   x86_64-unknown-linux-musl       the musl the pinned toolchain ships: no
#                                   flags
#   aarch64-unknown-linux-musl      the musl the stable toolchain ships for
#                                   aarch64 (its rust-std: musl's libc.a and
#                                   start files, LLVM's libunwind), linked
#                                   with rust-lld
#   armv7-unknown-linux-musleabihf  Debian's musl (armhf), linked with
#                                   Debian's armhf gcc
#
# rustup offers no armv7 musl standard library here at all, so armv7 links
# Debian's static musl (libc.a and the start files crt1.o, crti.o, crtn.o)
# with the cross gcc as the linker driver, its crtbeginT.o and crtend.o, and
# gcc's libgcc_eh.a as the unwinder the standard library names
# libunwind.a (ARM's unwinder needs only dl_iterate_phdr, which musl has;
# aarch64's libgcc_eh needs glibc's _dl_find_object, hence LLVM's there).
# Debian's musl-dev (armhf) is fetched from the Debian archive at a pinned
# version and checksum and unpacked under target/small/musl/, so that the
# machine needs no foreign architecture in its package manager.

STATIC_TARGETS=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf)

static_runtime_musl_version=1.2.3-1
static_runtime_armhf_sum=3a9dbb8ae66716f117dce87558fb47a161db0eebf0700cc6bf84ef6871ce7d38

# Unpacks Debian's static musl for armhf (once) and prints the directory
# with its libc.a and start files.
static_runtime_debian_armhf() {
  local root=target/small/musl/armhf
  local lib=$root/usr/lib/arm-linux-musleabihf
  if [ ! -f "$lib/libc.a" ]; then
    local deb=target/small/musl/musl-dev_${static_runtime_musl_version}_armhf.deb
    mkdir -p target/small/musl
    curl -fsSL --retry 3 -o "$deb.part" \
      "https://deb.debian.org/debian/pool/main/m/musl/musl-dev_${static_runtime_musl_version}_armhf.deb"
    if ! echo "$static_runtime_armhf_sum  $deb.part" | sha256sum -c --quiet -; then
      echo "musl-dev for armhf does not match its pinned checksum" >&2
      return 1
    fi
    mv "$deb.part" "$deb"
    rm -rf "$root/usr"
    dpkg-deb -x "$deb" "$root"
  fi
  echo "$PWD/$lib"
}

static_runtime() {
  local target=$1
  runtime_flags=()
  case "$target" in
    x86_64-unknown-linux-musl) ;;
    aarch64-unknown-linux-musl)
      local rt
      rt="$(rustc +stable --print sysroot)/lib/rustlib/$target/lib/self-contained"
      if [ ! -f "$rt/libc.a" ]; then
        echo "$target needs the stable toolchain's $target (rustup target add $target)" >&2
        return 1
      fi
      runtime_flags=(-Clink-self-contained=no -Clinker=rust-lld "-L$rt"
        "-Zpre-link-arg=$rt/crt1.o" "-Zpre-link-arg=$rt/crti.o" "-Zpre-link-arg=$rt/crtbegin.o"
        "-Clink-arg=$rt/crtend.o" "-Clink-arg=$rt/crtn.o")
      ;;
    armv7-unknown-linux-musleabihf)
      local gcc=arm-linux-gnueabihf-gcc musl gcc_lib unwind
      if ! command -v "$gcc" >/dev/null; then
        echo "$target links with $gcc (Debian's gcc-arm-linux-gnueabihf; scripts/setup installs it)" >&2
        return 1
      fi
      musl=$(static_runtime_debian_armhf) || return 1
      gcc_lib=$(dirname "$("$gcc" -print-libgcc-file-name)")
      # The unwinder the standard library links by the name libunwind.a.
      unwind=$PWD/target/small/musl/armhf/unwind
      mkdir -p "$unwind"
      ln -sf "$gcc_lib/libgcc_eh.a" "$unwind/libunwind.a"
      runtime_flags=(-Clink-self-contained=no "-Clinker=$gcc" "-L$musl" "-L$unwind"
        -Zpre-link-arg=-nostartfiles "-Zpre-link-arg=$musl/crt1.o" "-Zpre-link-arg=$musl/crti.o"
        "-Zpre-link-arg=$gcc_lib/crtbeginT.o" "-Clink-arg=$gcc_lib/crtend.o" "-Clink-arg=$musl/crtn.o")
      ;;
    *)
      echo "no static runtime recipe for $target (one of: ${STATIC_TARGETS[*]})" >&2
      return 1
      ;;
  esac
}

# The flags, one per field as CARGO_ENCODED_RUSTFLAGS takes them (a path
# with a space in it stays whole).
encoded_flags() {
  local IFS=$'\x1f'
  echo "$*"
}
