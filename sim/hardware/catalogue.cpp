#include "hardware/catalogue.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "config/embedded_files.hpp"
#include "config/strict_reader.hpp"
#include "core/error.hpp"
#include "core/units.hpp"

namespace tiersim::hw {
namespace {

using config::Section;

struct GpuEntry {
  CatalogueGpu info;
  YAML::Node gpu;  // the profile's gpu section, less count
};
struct HostEntry {
  int pcie_generation = 0, gpu_lanes = 0;
  YAML::Node host, disk;  // disk: a null node when the host has none
  std::string description;
};
struct HostLinkEntry {
  int generation = 0, width = 0;
  double raw = 0, pinned = 0, pageable = 0, bidirectional = 0;
  std::string source;  // optional: the published copy rates this entry was checked against
};
struct PeerEntry {
  std::string type, source;
  bool builtin = false;
  YAML::Node transfer;         // NVLink: the link's own numbers
  double bidirectional = 0;
  double of_transfer = 0, of_bidirectional = 0, latency = 0;  // PCIe: fractions of the host link's pinned rate
};
struct ManagedRules {
  YAML::Node constants;  // every key but of_pinned_h2d, copied into the profile
  std::vector<std::pair<std::string, double>> of_pinned;
};

struct Catalogue {
  std::map<std::string, GpuEntry> gpus;
  std::map<std::string, HostEntry> hosts;
  std::map<std::string, HostLinkEntry> host_links;
  double pinned_latency = 0, pageable_latency = 0;
  YAML::Node fresh_pageable_d2h;  // the curve every composed link gets as d2h_fresh_pageable (absent: none)
  std::map<std::string, PeerEntry> peers;
  ManagedRules managed;
  std::vector<std::pair<std::string, std::string>> presets;
  std::vector<CatalogueGpu> gpu_list;
};

std::string file_name(const std::string& name) { return "calib/catalogue/" + name + ".yaml"; }

// The root of a catalogue file, its version checked.
Section open_file(const std::string& text, const std::string& file, YAML::Node& holder) {
  holder = config::parse_document(text, file);
  if (!holder.IsMap()) throw InputError(file, 0, "", "expected a YAML mapping (a catalogue file)");
  return Section(holder, "", file);
}

Price read_price(Section& s) {
  Section p = s.child("price");
  Price price;
  price.usd = p.number("usd", 1, 1e7);
  price.source = p.text("source");
  price.date = p.text("date");
  p.finish();
  return price;
}

void read_gpu(Catalogue& c, const config::EmbeddedFile& f) {
  const std::string file = "calib/catalogue/gpus/" + f.name + ".yaml";
  YAML::Node root;
  Section top = open_file(f.text, file, root);
  if (top.integer("tiersim_catalogue_gpu", 1, 1000) != 1)
    throw InputError(file, 0, "tiersim_catalogue_gpu", "unsupported catalogue schema version (this build reads 1)");
  GpuEntry e;
  e.info.id = top.text("id");
  if (e.info.id != f.name) top.fail("id", "must equal the file's name ('" + f.name + "')");
  e.info.architecture = top.text("architecture");
  e.info.segment = top.text("segment");
  if (e.info.segment != "consumer" && e.info.segment != "workstation" && e.info.segment != "datacenter")
    top.fail("segment", "consumer, workstation or datacenter, not '" + e.info.segment + "'");
  {
    Section i = top.child("interface");
    e.info.pcie_generation = i.integer("generation", 3, 6);
    e.info.pcie_width = i.integer("width", 1, 16);
    i.finish();
  }
  e.info.default_host = top.text("default_host");
  if (top.has("nvlink")) e.info.nvlink = top.text("nvlink");
  if (top.has("price")) e.info.price = read_price(top);
  Section g = top.child("gpu");
  e.gpu = YAML::Clone(g.node());
  if (e.gpu["count"]) g.fail("count", "a catalogue GPU is one card: the count is the composition's (2xrtx3090)");
  e.info.name = g.text("name");
  e.info.memory = g.bytes("memory");
  e.info.memory_bandwidth = g.bandwidth("memory_bandwidth");
  const auto rates = g.rates("compute");
  if (const auto it = rates.find("bf16"); it != rates.end()) e.info.bf16 = it->second;
  if (g.has("provenance")) e.info.provenance = g.text("provenance");  // checked when composed (profile_loader.cpp)
  top.finish();  // the gpu section's own keys are checked when a composition is loaded as a profile
  c.gpus.emplace(e.info.id, std::move(e));
}

void read_hosts(Catalogue& c, const std::string& text) {
  const std::string file = file_name("hosts");
  YAML::Node root;
  Section top = open_file(text, file, root);
  top.integer("tiersim_catalogue", 1, 1);
  Section hosts = top.child("hosts");
  for (const std::string& id : hosts.keys()) {
    Section h = hosts.child(id);
    HostEntry e;
    e.pcie_generation = h.integer("pcie_generation", 3, 6);
    e.gpu_lanes = h.integer("gpu_lanes", 1, 1024);
    Section hs = h.child("host");
    e.host = YAML::Clone(hs.node());
    e.description = hs.text("name");
    if (h.has("disk")) e.disk = YAML::Clone(h.child("disk").node());
    h.finish();
    c.hosts.emplace(id, std::move(e));
  }
  hosts.finish();
  top.finish();
}

void read_host_links(Catalogue& c, const std::string& text) {
  const std::string file = file_name("host_links");
  YAML::Node root;
  Section top = open_file(text, file, root);
  top.integer("tiersim_catalogue", 1, 1);
  Section links = top.child("host_links");
  for (const std::string& id : links.keys()) {
    Section l = links.child(id);
    HostLinkEntry e;
    e.generation = l.integer("generation", 3, 6);
    e.width = l.integer("width", 1, 16);
    e.raw = l.bandwidth("raw");
    e.pinned = l.bandwidth("pinned");
    e.pageable = l.bandwidth("pageable");
    e.bidirectional = l.bandwidth("bidirectional");
    if (l.has("source")) e.source = l.text("source");
    if (e.pinned > e.raw) l.fail("pinned", "exceeds the raw rate");
    l.finish();
    const std::string expected = "pcie" + std::to_string(e.generation) + "-x" + std::to_string(e.width);
    if (id != expected) links.fail(id, "a host link is named by its generation and width: '" + expected + "'");
    c.host_links.emplace(id, e);
  }
  links.finish();
  Section lat = top.child("latency");
  c.pinned_latency = lat.duration("pinned");
  c.pageable_latency = lat.duration("pageable");
  lat.finish();
  if (top.has("fresh_pageable_d2h")) {
    Section f = top.child("fresh_pageable_d2h");
    c.fresh_pageable_d2h = YAML::Clone(f.node());
    f.bandwidth("bandwidth");
    f.duration("latency");
    if (f.has("points")) f.size_rate_points("points");
    f.finish();
  }
  top.finish();
}

void read_peers(Catalogue& c, const std::string& text) {
  const std::string file = file_name("peer_links");
  YAML::Node root;
  Section top = open_file(text, file, root);
  top.integer("tiersim_catalogue", 1, 1);
  Section peers = top.child("peer_links");
  for (const std::string& id : peers.keys()) {
    Section p = peers.child(id);
    PeerEntry e;
    e.type = p.text("type");
    e.source = p.text("source");
    if (p.has("builtin")) e.builtin = p.flag("builtin");
    if (e.type == "nvlink") {
      Section t = p.child("transfer");
      e.transfer = YAML::Clone(t.node());
      t.bandwidth("bandwidth");
      t.duration("latency");
      t.finish();
      e.bidirectional = p.bandwidth("bidirectional");
    } else if (e.type == "pcie") {
      Section of = p.child("of_host_link");
      e.of_transfer = of.number("transfer", 0.01, 1.0);
      e.of_bidirectional = of.number("bidirectional", 0.01, 2.0);
      of.finish();
      e.latency = p.duration("latency");
    } else {
      p.fail("type", "nvlink or pcie, not '" + e.type + "'");
    }
    p.finish();
    c.peers.emplace(id, std::move(e));
  }
  peers.finish();
  top.finish();
}

void read_managed(Catalogue& c, const std::string& text) {
  const std::string file = file_name("managed_memory");
  YAML::Node root;
  Section top = open_file(text, file, root);
  top.integer("tiersim_catalogue", 1, 1);
  Section m = top.child("managed_memory");
  c.managed.constants = YAML::Clone(m.node());
  c.managed.constants.remove("of_pinned_h2d");
  Section of = m.child("of_pinned_h2d");
  for (const std::string& key : of.keys()) c.managed.of_pinned.emplace_back(key, of.number(key, 0.001, 2.0));
  of.finish();
  top.finish();  // the constants are checked when a composition is loaded as a profile
}

void read_presets(Catalogue& c, const std::string& text) {
  const std::string file = file_name("presets");
  YAML::Node root;
  Section top = open_file(text, file, root);
  top.integer("tiersim_catalogue", 1, 1);
  Section p = top.child("presets");
  for (const std::string& name : p.keys()) c.presets.emplace_back(name, p.text(name));
  p.finish();
  top.finish();
}

const Catalogue& catalogue() {
  static const Catalogue c = [] {
    Catalogue c;
    for (const auto& f : config::embedded_catalogue_gpus()) read_gpu(c, f);
    std::map<std::string, void (*)(Catalogue&, const std::string&)> readers{
        {"hosts", read_hosts}, {"host_links", read_host_links}, {"peer_links", read_peers},
        {"managed_memory", read_managed}, {"presets", read_presets}};
    for (const auto& f : config::embedded_catalogue()) {
      const auto it = readers.find(f.name);
      if (it == readers.end()) throw InputError(file_name(f.name), 0, "", "not a catalogue file this build knows");
      it->second(c, f.text);
      readers.erase(it);
    }
    if (!readers.empty()) throw InputError(file_name(readers.begin()->first), 0, "", "missing from the catalogue");
    for (const auto& [id, g] : c.gpus) {
      const std::string file = "calib/catalogue/gpus/" + id + ".yaml";
      if (!c.hosts.count(g.info.default_host))
        throw InputError(file, 0, "default_host", "no host '" + g.info.default_host + "' in hosts.yaml");
      if (!g.info.nvlink.empty() && (!c.peers.count(g.info.nvlink) || c.peers.at(g.info.nvlink).type != "nvlink"))
        throw InputError(file, 0, "nvlink", "no NVLink '" + g.info.nvlink + "' in peer_links.yaml");
      c.gpu_list.push_back(g.info);
    }
    return c;
  }();
  return c;
}

// A quantity as the profile loader reads it: the shortest decimal that reads back as the same double.
std::string quantity(double v, const char* unit) { return nlohmann::json(v).dump() + " " + unit; }

YAML::Node curve(double bandwidth, double latency) {
  YAML::Node n;
  n["bandwidth"] = quantity(bandwidth, "B/s");
  n["latency"] = quantity(latency, "s");
  return n;
}

std::string gb_s(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g GB/s", v / 1e9);
  return buf;
}

[[noreturn]] void bad(const std::string& spec, const std::string& message) {
  throw InputError("", 0, "--hw", "'" + spec + "': " + message);
}

std::string ids(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& s : list) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The GPU term: an optional count ("2x") and a GPU id.
std::pair<int, std::string> gpu_term(const std::string& term) {
  std::size_t i = 0;
  while (i < term.size() && std::isdigit(static_cast<unsigned char>(term[i]))) ++i;
  if (i > 0 && i < term.size() && term[i] == 'x') {
    const std::string digits = term.substr(0, i);
    const int count = digits.size() > 2 ? 1000 : std::stoi(digits);
    return {count, term.substr(i + 1)};
  }
  return {1, term};
}

// `count` GPUs at the user's price, else at the launch price; absent when neither is known.
std::optional<Price> gpu_price(const CatalogueGpu& gpu, int count, std::optional<double> user_usd) {
  if (!user_usd && !gpu.price) return std::nullopt;
  Price p;
  char usd[32];
  std::snprintf(usd, sizeof usd, "$%.0f", user_usd ? *user_usd : gpu.price->usd);
  p.usd = (user_usd ? *user_usd : gpu.price->usd) * count;
  p.date = user_usd ? "" : gpu.price->date;
  p.source = (count > 1 ? std::to_string(count) + " x " : "") + gpu.name + " at " + usd +
             (user_usd ? std::string(" (--price)") : " (" + gpu.price->date + "): " + gpu.price->source) +
             "; host, links and bridges not priced";
  return p;
}

std::vector<std::string> split_terms(const std::string& spec) {
  std::vector<std::string> terms;
  std::size_t start = 0;
  for (;;) {
    const std::size_t plus = spec.find('+', start);
    terms.push_back(spec.substr(start, plus == std::string::npos ? std::string::npos : plus - start));
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  return terms;
}

}  // namespace

const std::vector<CatalogueGpu>& catalogue_gpus() { return catalogue().gpu_list; }

std::vector<std::pair<std::string, std::string>> catalogue_hosts() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [id, h] : catalogue().hosts)
    out.emplace_back(id, h.description + ", PCIe " + std::to_string(h.pcie_generation) + ".0, " +
                             std::to_string(h.gpu_lanes) + " CPU lanes for GPUs");
  return out;
}

std::vector<std::pair<std::string, std::string>> catalogue_host_links() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [id, l] : catalogue().host_links)
    out.emplace_back(id, "PCIe " + std::to_string(l.generation) + ".0 x" + std::to_string(l.width) + ": " +
                             gb_s(l.raw) + " raw, pinned " + gb_s(l.pinned) + ", pageable " + gb_s(l.pageable));
  return out;
}

std::vector<std::pair<std::string, std::string>> catalogue_peer_links() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [id, p] : catalogue().peers) out.emplace_back(id, p.source);
  return out;
}

const std::vector<std::pair<std::string, std::string>>& catalogue_presets() { return catalogue().presets; }

bool is_composition(const std::string& spec) {
  const std::string first = split_terms(spec).front();
  return catalogue().gpus.count(gpu_term(first).second) > 0;
}

Composed compose(const std::string& spec) {
  const Catalogue& c = catalogue();
  const std::vector<std::string> terms = split_terms(spec);
  const auto [count, gpu_id] = gpu_term(terms.front());
  const auto git = c.gpus.find(gpu_id);
  if (git == c.gpus.end()) {
    std::vector<std::string> known;
    for (const auto& g : c.gpu_list) known.push_back(g.id);
    bad(spec, "'" + gpu_id + "' is not a catalogue GPU (" + ids(known) + ")");
  }
  const GpuEntry& gpu = git->second;
  if (count < 1 || count > 64) bad(spec, "the GPU count must be 1 to 64");

  std::string host_id, slot_id, peer_id;
  std::optional<double> ram_gib;
  for (std::size_t i = 1; i < terms.size(); ++i) {
    const std::string& t = terms[i];
    auto once = [&](std::string& slot, const char* what) {
      if (!slot.empty()) bad(spec, std::string("two ") + what + " ('" + slot + "' and '" + t + "')");
      slot = t;
    };
    if (t.empty()) {
      bad(spec, "an empty part (two '+' in a row, or one at an end)");
    } else if (c.hosts.count(t)) {
      once(host_id, "hosts");
    } else if (c.host_links.count(t)) {
      once(slot_id, "host links");
    } else if (t == "nvlink" || c.peers.count(t)) {
      once(peer_id, "peer links");
    } else if (t.rfind("ram", 0) == 0 && t.size() > 3 &&
               std::all_of(t.begin() + 3, t.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
      if (ram_gib) bad(spec, "two host memory sizes");
      ram_gib = t.size() > 9 ? 1e9 : std::stod(t.substr(3));
      if (*ram_gib < 1 || *ram_gib > 65536) bad(spec, "'" + t + "': host memory must be 1 to 65536 GiB");
    } else {
      std::vector<std::string> known;
      for (const auto& [id, h] : c.hosts) known.push_back(id);
      for (const auto& [id, l] : c.host_links) known.push_back(id);
      known.push_back("nvlink");
      for (const auto& [id, p] : c.peers) known.push_back(id);
      known.push_back("ramGIB");
      bad(spec, "'" + t + "' is not a catalogue part (" + ids(known) + ")");
    }
  }
  if (host_id.empty()) host_id = gpu.info.default_host;
  const HostEntry& host = c.hosts.at(host_id);

  // The link the card gets: the lowest generation of card, CPU and slot; the narrower of the card's width, the
  // slot's, and the CPU's GPU lanes shared among the cards (at least x4, in whole PCIe widths).
  int generation = std::min(gpu.info.pcie_generation, host.pcie_generation);
  int width = gpu.info.pcie_width;
  if (!slot_id.empty()) {
    const HostLinkEntry& slot = c.host_links.at(slot_id);
    generation = std::min(generation, slot.generation);
    width = std::min(width, slot.width);
  } else {
    if (count * 4 > host.gpu_lanes)
      bad(spec, std::to_string(count) + " cards need " + std::to_string(4 * count) + " CPU lanes at x4 each; the " +
                    host_id + " host has " + std::to_string(host.gpu_lanes) +
                    " for GPUs (name a server host, or the slot: +pcie4-x4)");
    width = std::min(width, host.gpu_lanes / count);
  }
  generation = std::max(generation, 3);
  width = width >= 16 ? 16 : width >= 8 ? 8 : 4;
  const std::string link_id = "pcie" + std::to_string(generation) + "-x" + std::to_string(width);
  const auto lit = c.host_links.find(link_id);
  if (lit == c.host_links.end()) bad(spec, "no host link '" + link_id + "' in the catalogue");
  const HostLinkEntry& link = lit->second;

  // The peer link: named, else the GPU's built-in NVLink, else PCIe (staged through the host on GeForce).
  if (peer_id == "nvlink") {
    if (gpu.info.nvlink.empty()) bad(spec, "the " + gpu.info.name + " has no NVLink");
    peer_id = gpu.info.nvlink;
  }
  if (!peer_id.empty()) {
    if (count < 2) bad(spec, "a peer link ('" + peer_id + "') needs two or more GPUs ('2x" + gpu_id + "')");
    const PeerEntry& p = c.peers.at(peer_id);
    if (p.type == "nvlink" && !p.builtin && count != 2)
      bad(spec, "'" + peer_id + "' is a bridge between two cards; " + std::to_string(count) + " cards cannot all share it");
    if (p.type == "nvlink" && peer_id != gpu.info.nvlink)
      bad(spec, "'" + peer_id + "' is not the " + gpu.info.name + "'s NVLink" +
                    (gpu.info.nvlink.empty() ? " (it has none)" : " ('" + gpu.info.nvlink + "')"));
    if (p.type == "pcie" && !gpu.info.nvlink.empty() && c.peers.at(gpu.info.nvlink).builtin)
      bad(spec, "the " + gpu.info.name + "'s GPUs are joined by their built-in NVLink ('" + gpu.info.nvlink + "')");
    if (peer_id == "pcie-p2p" && gpu.info.segment == "consumer")
      bad(spec, "GeForce cards have no peer-to-peer over PCIe: 'pcie-staged'");
  } else if (count > 1) {
    if (!gpu.info.nvlink.empty() && c.peers.at(gpu.info.nvlink).builtin) peer_id = gpu.info.nvlink;
    else peer_id = gpu.info.segment == "consumer" ? "pcie-staged" : "pcie-p2p";
  }

  Composed out;
  out.canonical = (count > 1 ? std::to_string(count) + "x" : "") + gpu_id + "+" + host_id + "+" + link_id +
                  (peer_id.empty() ? "" : "+" + peer_id) +
                  (ram_gib ? "+ram" + std::to_string(static_cast<long long>(*ram_gib)) : "");
  YAML::Node& t = out.tree;
  t["tiersim_profile"] = 1;
  t["name"] = out.canonical;
  t["description"] = (count > 1 ? std::to_string(count) + " x " : "") + gpu.info.name + ", " +
                     (ram_gib ? host.description + " with " + std::to_string(static_cast<long long>(*ram_gib)) + " GiB"
                              : host.description) +
                     ", PCIe " + std::to_string(generation) + ".0 x" + std::to_string(width) +
                     (peer_id.empty() ? "" : ", " + peer_id) + " (catalogue composition)";
  YAML::Node g = YAML::Clone(gpu.gpu);
  g["count"] = count;
  t["gpu"] = g;
  YAML::Node h = YAML::Clone(host.host);
  if (ram_gib) h["memory"] = std::to_string(static_cast<long long>(*ram_gib)) + " GiB";
  t["host"] = h;

  YAML::Node hl;
  hl["source"] = "PCIe " + std::to_string(generation) + ".0 x" + std::to_string(width) + ": " + gb_s(link.raw) +
                 " raw per direction; the catalogue's link (calib/catalogue/host_links.yaml: pinned 83% of raw, "
                 "pageable rate, latency and bidirectional limit assumed" +
                 (c.fresh_pageable_d2h ? std::string("; d2h_fresh_pageable carried as the H100 validation host measured it)")
                                       : std::string(")")) +
                 (link.source.empty() ? std::string() : "; " + link.source);
  hl["type"] = "pcie";
  hl["generation"] = generation;
  hl["width"] = width;
  hl["h2d_pinned"] = curve(link.pinned, c.pinned_latency);
  hl["d2h_pinned"] = curve(link.pinned, c.pinned_latency);
  hl["h2d_pageable"] = curve(link.pageable, c.pageable_latency);
  hl["d2h_pageable"] = curve(link.pageable, c.pageable_latency);
  if (c.fresh_pageable_d2h) hl["d2h_fresh_pageable"] = YAML::Clone(c.fresh_pageable_d2h);
  hl["bidirectional"] = quantity(link.bidirectional, "B/s");
  t["host_link"] = hl;

  if (!peer_id.empty()) {
    const PeerEntry& p = c.peers.at(peer_id);
    YAML::Node pl;
    pl["source"] = p.source;
    pl["type"] = p.type;
    if (p.type == "nvlink") {
      pl["transfer"] = YAML::Clone(p.transfer);
      pl["bidirectional"] = quantity(p.bidirectional, "B/s");
    } else {
      pl["transfer"] = curve(p.of_transfer * link.pinned, p.latency);
      pl["bidirectional"] = quantity(p.of_bidirectional * link.pinned, "B/s");
    }
    t["peer_link"] = pl;
  }

  YAML::Node um = YAML::Clone(c.managed.constants);
  for (const auto& [key, ratio] : c.managed.of_pinned) um[key] = quantity(ratio * link.pinned, "B/s");
  t["managed_memory"] = um;
  if (host.disk.IsMap()) t["disk"] = YAML::Clone(host.disk);

  out.gpu = gpu_id;
  out.count = count;
  out.price = gpu_price(gpu.info, count, std::nullopt);
  return out;
}

std::optional<Price> price_of(const std::string& spec, const std::map<std::string, double>& usd_by_gpu) {
  std::string composition = spec;
  bool found = false;
  for (const auto& [name, preset_composition] : catalogue().presets)
    if (name == spec) composition = preset_composition, found = true;
  if (!found && !is_composition(spec)) return std::nullopt;
  const Composed c = compose(composition);
  const auto it = usd_by_gpu.find(c.gpu);
  return gpu_price(catalogue().gpus.at(c.gpu).info, c.count,
                   it == usd_by_gpu.end() ? std::nullopt : std::optional<double>(it->second));
}

}  // namespace tiersim::hw
