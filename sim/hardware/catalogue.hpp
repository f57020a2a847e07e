#pragma once
// The hardware catalogue (calib/catalogue/, format in its README.md): GPUs, hosts, host links and peer links, each
// with its datasheet source, and GPU launch prices. A machine is a composition of them, written
//   [Nx]GPU[+HOST][+pcieG-xW][+nvlink|+PEER][+ramGIB]       e.g. 2xrtx3090+nvlink, rtx4060ti-16gb+pcie3-x8
// and composed into a hardware profile tree (calib/profiles/SCHEMA.md) that the profile loader reads like any
// other: the host defaults to the GPU's, the host link runs at the lowest PCIe generation of card, CPU and slot and
// at the narrower of the card's width and the CPU's GPU lanes shared among the cards; several GPUs talk over their
// built-in NVLink, the bridge `+nvlink` names, or PCIe (peer-to-peer, or staged through the host on GeForce);
// managed-memory costs scale with the link (managed_memory.yaml). Prices are the planner's: a hardware profile
// (and so every prediction) does not depend on them.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace tiersim::hw {

struct Price {
  double usd = 0;
  std::string source;  // what is priced and where the price comes from
  std::string date;    // when it was that price (a GPU's launch day)
};

struct CatalogueGpu {
  std::string id, name, architecture, segment;  // segment: consumer, workstation or datacenter
  double memory = 0;                            // bytes per GPU
  double memory_bandwidth = 0;                  // B/s
  double bf16 = 0;                              // dense FLOP/s (0: none listed)
  int pcie_generation = 0, pcie_width = 0;
  std::string default_host, nvlink;             // nvlink: "" when the part has none
  std::string provenance = "datasheet";         // its gpu section's provenance (profile.hpp, GpuSpec)
  std::optional<Price> price;
};
// Every catalogue GPU, sorted by id.
const std::vector<CatalogueGpu>& catalogue_gpus();
// Host, host-link and peer-link ids with their descriptions, sorted by id.
std::vector<std::pair<std::string, std::string>> catalogue_hosts();
std::vector<std::pair<std::string, std::string>> catalogue_host_links();
std::vector<std::pair<std::string, std::string>> catalogue_peer_links();
// The hardware presets as compositions (presets.yaml): (preset name, composition).
const std::vector<std::pair<std::string, std::string>>& catalogue_presets();

// Whether `spec` reads as a composition: its first term (less an `Nx` count) is a catalogue GPU id.
bool is_composition(const std::string& spec);

// The profile tree of a composition, and its canonical spelling (every part named: the profile's name).
// InputError naming --hw and the term that does not fit (unknown part, two hosts, NVLink the GPU lacks, ...).
struct Composed {
  YAML::Node tree;
  std::string canonical;
  std::string gpu;  // the GPU's id
  int count = 1;
  std::optional<Price> price;  // the GPUs' launch prices times their count; absent when a GPU has none
};
Composed compose(const std::string& spec);

// What a `--hw` value costs: a composition by its parts, a preset by its composition (presets.yaml); absent for
// files, measured profiles and unpriced parts. `usd_by_gpu` replaces GPUs' launch prices (what the user would pay).
std::optional<Price> price_of(const std::string& spec, const std::map<std::string, double>& usd_by_gpu = {});

}  // namespace tiersim::hw
