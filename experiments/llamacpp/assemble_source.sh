#!/usr/bin/env bash
# Assembles the part of llama.cpp that the kit builds (llama-bench, llama-quantize, llama-fit-params, test-backend-ops,
# the CPU and CUDA backends, gguf-py) into experiments/llamacpp/carry/llama.cpp/, from a local git mirror.
# carry/ is ignored by git: llama.cpp's code is read and built here, never committed.
#   assemble_source.sh [COMMIT]     (default: the pinned upstream commit below)
# Environment: LLAMACPP_GIT_DIR  the bare git dir to archive from
#              (default /work/.mirror/unslothai+llama.cpp/repo, a full-history mirror of a fork that holds
#              ggml-org/llama.cpp's master history).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
git_dir=${LLAMACPP_GIT_DIR:-/work/.mirror/unslothai+llama.cpp/repo}
# ggml-org/llama.cpp master, 2026-08-17, "ci : push release tag explicitly in release.yml (#27261)"
commit=${1:-34af94cd9ab277632e27caeec2d41de2fd091b31}
dest=$here/carry/llama.cpp

[ -d "$git_dir" ] || { echo "assemble_source: no git dir at $git_dir (set LLAMACPP_GIT_DIR)" >&2; exit 1; }
full=$(git --git-dir="$git_dir" rev-parse --verify "$commit^{commit}") ||
  { echo "assemble_source: commit $commit not in $git_dir" >&2; exit 1; }

# What the build needs. ggml/src is taken whole except the backends the kit never enables: their folders
# are only entered by ggml_add_backend() when GGML_<NAME>=ON, so CMake configures without them.
paths=(
  CMakeLists.txt LICENSE cmake
  ggml/CMakeLists.txt ggml/cmake ggml/include ggml/src
  src include common
  tools/llama-bench tools/quantize tools/fit-params
  tests/test-backend-ops.cpp
  vendor/cpp-httplib vendor/nlohmann vendor/sheredom
  gguf-py licenses
)
drop_backends=(cann et hexagon hip metal musa opencl openvino rpc sycl virtgpu vulkan webgpu zdnn zendnn)
excludes=()
for b in "${drop_backends[@]}"; do excludes+=(":(exclude)ggml/src/ggml-$b"); done

rm -rf "$dest"
mkdir -p "$dest"
# The mirror lacks some large blobs elsewhere in the tree (models/*.gguf): git archive names them on stderr
# even though they lie outside the paths asked for. Keep its stderr aside and check the result instead.
err=$(mktemp)
git --git-dir="$git_dir" archive --format=tar "$full" -- "${paths[@]}" "${excludes[@]}" 2>"$err" | tar -x -C "$dest"
drop_re="^ggml/src/ggml-($(IFS='|'; echo "${drop_backends[*]}"))/"
want=$(git --git-dir="$git_dir" ls-tree -r --name-only "$full" -- "${paths[@]}" | grep -c -v -E "$drop_re")
have=$(find "$dest" -type f | wc -l)
if [ "$want" -ne "$have" ]; then
  cat "$err" >&2
  echo "assemble_source: extracted $have files, the commit has $want under the chosen paths" >&2
  rm -f "$err"; exit 1
fi
rm -f "$err"
echo "$full" > "$dest/COMMIT"
git --git-dir="$git_dir" rev-list --count "$full" > "$dest/BUILD_NUMBER"
git --git-dir="$git_dir" log -1 --format='%an <%ae>, %ad: %s' --date=iso "$full" > "$dest/COMMIT_SUBJECT"

echo "assemble_source: $full ($(cat "$dest/COMMIT_SUBJECT"))"
echo "assemble_source: build number b$(cat "$dest/BUILD_NUMBER")"
bytes=$(du -sb "$dest" | cut -f1)
echo "assemble_source: $(find "$dest" -type f | wc -l) files, $(awk "BEGIN{printf \"%.1f\", $bytes / 1048576}") MiB ($(du -sh "$dest" | cut -f1) on disk) in $dest"
if [ "$bytes" -gt $((40 * 1024 * 1024)) ]; then
  echo "assemble_source: WARNING: over 40 MiB; the device tool carries at most 64 MiB of ignored paths" >&2
fi
