// The managed-memory model refuses a VA block size that would model an absurd number of blocks.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "managed/managed_memory.hpp"

namespace tiersim {
namespace {

struct OneTensor {
  trace::Header header;
  placement::Placement placement;
  explicit OneTensor(std::uint64_t bytes) {
    trace::Tensor t;
    t.bytes = bytes;
    t.name = "w";
    header.tensors.push_back(t);
    placement.device.assign(1, placement::kCpu);
    placement.managed.enabled = true;
    placement.managed.managed.assign(1, true);
    placement.managed.advice.assign(1, placement::kAdviseNone);
  }
};

// va_block "1 B" under um allocated one block per byte (15 GB of memory for a 15 GB model, then bad_alloc).
TEST(ManagedMemoryBounds, AOneByteBlockIsRefusedBeforeAnythingIsAllocated) {
  const OneTensor m(std::uint64_t{1} << 30);
  hw::ManagedMemorySpec spec;
  spec.va_block = 1;
  try {
    managed::ManagedMemory mm(spec, m.header, m.placement, 8e9);
    FAIL() << "accepted " << mm.footprint_blocks() << " blocks";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "managed_memory.va_block");
    EXPECT_NE(std::string(e.what()).find("at most 16,777,216 are modelled"), std::string::npos) << e.what();
  }
  spec.va_block = 0;
  EXPECT_THROW(managed::ManagedMemory(spec, m.header, m.placement, 8e9), InputError);
}

TEST(ManagedMemoryBounds, TheDriversBlockSizeIsUnchanged) {
  const OneTensor m(std::uint64_t{1} << 30);
  hw::ManagedMemorySpec spec;  // 2 MiB
  managed::ManagedMemory mm(spec, m.header, m.placement, 8e9);
  EXPECT_EQ(mm.footprint_blocks(), 512u);
  EXPECT_EQ(mm.footprint_bytes(), double(std::uint64_t{1} << 30));
  EXPECT_EQ(mm.capacity_bytes(), 1953125.0 * 4096);  // 8e9 B in whole 4 KiB GPU pages
}

// A small tensor's block takes the GPU pages it covers, not the 2 MiB block (nvidia-uvm block_gpu_chunk_size).
TEST(ManagedMemoryBounds, ASmallTensorsBlockTakesItsPages) {
  const OneTensor m(10 * 1024);
  hw::ManagedMemorySpec spec;
  managed::ManagedMemory mm(spec, m.header, m.placement, 8e9);
  EXPECT_EQ(mm.footprint_blocks(), 1u);
  EXPECT_EQ(mm.footprint_bytes(), 12.0 * 1024);
}

}  // namespace
}  // namespace tiersim
