#!/usr/bin/env bash
# Builds the English training corpus of llmrt's own small model (models/llmrt-tiny) from Debian 12
# packages, on a Debian 12 machine with apt access:
#   .carry/corpus/train.txt.gz, .carry/corpus/heldout.txt.gz, .carry/corpus/stats.json
#   models/llmrt-tiny/CORPUS.md (sources, versions, licenses, byte counts)
# Idempotent: installs only the packages that are missing. Intermediate files go to
# build/model-corpus/. Needs root or sudo for apt-get. See scripts/model/README.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${LLMRT_CORPUS_WORK:-$root/build/model-corpus}
out=${LLMRT_CORPUS_OUT:-$root/.carry/corpus}
corpus_md=$root/models/llmrt-tiny/CORPUS.md
jobs=${LLMRT_CORPUS_JOBS:-2}

packages=(
  # tools
  man-db groff-base bsdextrautils apt python3
  # text sources
  bible-kjv bible-kjv-text wordnet-base python3.11-doc debian-policy developers-reference
  debian-reference-en maint-guide
  # man page sources (build_corpus.py MAN_PACKAGES)
  manpages manpages-dev perl-doc coreutils bash git-man util-linux tar grep sed findutils diffutils
  procps dpkg dpkg-dev man-db make openssl iproute2 less curl wget openssh-client tmux e2fsprogs systemd
)

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "build_corpus: need root or sudo for apt-get" >&2; exit 1; }
  sudo="sudo"
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} > 0)); then
  echo "build_corpus: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "build_corpus: all ${#packages[@]} packages present"
fi

# Man pages must be installed as files (Docker-style images may exclude them with dpkg path-exclude).
if [[ ! -f /usr/share/man/man1/ls.1.gz ]]; then
  echo "build_corpus: /usr/share/man/man1/ls.1.gz is missing; man pages are excluded by dpkg" \
       "(see /etc/dpkg/dpkg.cfg.d/); remove the exclusion and reinstall the packages" >&2
  exit 1
fi

mkdir -p "$work" "$out"

# Long package descriptions live in the archive's Translation-en index, which Docker images often
# skip (Acquire::Languages "none"). Use the system's copy when there is one; else fetch the bookworm
# main index into a private lists directory (the system's apt state is left alone).
translation=$work/Translation-en
origin=""
sys_tr=$(ls /var/lib/apt/lists/*debian.org_debian_dists_bookworm_main_i18n_Translation-en* 2>/dev/null | head -1 || true)
if [[ -n $sys_tr ]]; then
  /usr/lib/apt/apt-helper cat-file "$sys_tr" > "$translation"
  rel=$(ls /var/lib/apt/lists/*debian.org_debian_dists_bookworm_InRelease 2>/dev/null | head -1 || true)
else
  apt_dir=$work/apt
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache" "$apt_dir/parts"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" \
    > "$apt_dir/sources.list"
  cat > "$apt_dir/apt.conf" <<EOF
Dir::Etc::Parts "$apt_dir/parts";
Acquire::Languages { "en"; };
Acquire::Check-Valid-Until "false";
EOF
  echo "build_corpus: fetching the bookworm main Translation-en index"
  APT_CONFIG=$apt_dir/apt.conf $sudo apt-get update -qq \
    -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" \
    -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
  tr_file=$(ls "$apt_dir"/lists/*_bookworm_main_i18n_Translation-en* 2>/dev/null | head -1 || true)
  if [[ -n $tr_file ]]; then
    /usr/lib/apt/apt-helper cat-file "$tr_file" > "$translation"
  else
    echo "build_corpus: warning: no Translation-en index; falling back to apt-cache dumpavail" >&2
    rm -f "$translation"
  fi
  rel=$(ls "$apt_dir"/lists/*_bookworm_InRelease 2>/dev/null | head -1 || true)
  rm -rf "$apt_dir/cache"  # apt's binary caches for the private lists: not needed any more
fi
tr_args=()
if [[ -s $translation ]]; then
  date=""
  [[ -n ${rel:-} ]] && date=$(grep -m1 '^Date:' "$rel" | cut -d' ' -f2- || true)
  sha=$(sha256sum "$translation" | cut -c1-16)
  origin="bookworm/main/i18n/Translation-en, Release date ${date:-unknown}, sha256 ${sha}..."
  tr_args=(--translation "$translation" --translation-origin "$origin")
fi

python3 "$root/scripts/model/build_corpus.py" --out "$out" --corpus-md "$corpus_md" --jobs "$jobs" "${tr_args[@]}"

ls -l "$out"
python3 - "$out/stats.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["splits"]
raw = sum(v["bytes"] for v in s.values())
gz = sum(v["gz_bytes"] for v in s.values())
print(f"build_corpus: {raw / 1e6:.1f} MB of text, {gz / 1e6:.1f} MB compressed")
if raw < 50e6:
    print("build_corpus: warning: under the 50 MB target", file=sys.stderr)
EOF
