// The names of the Config enums (config.h), as the options and the output spell them.
#include "train/config.h"

#include "exchange/pieces.h"
#include "gemm/gemm.h"

namespace nn::train {

std::size_t exchange_piece_values(std::size_t chunk_bytes, std::size_t n_layer1, std::size_t value_size) {
  return exchange::piece_values(chunk_bytes == kExchangeChunkAuto ? kExchangeChunkAutoBytes : chunk_bytes, n_layer1,
                                value_size);
}

const char* device_name(Device d) { return d == Device::Cpu ? "cpu" : "gpu"; }

const char* comm_name(Comm c) {
  switch (c) {
    case Comm::Host: return "host";
    case Comm::Device: return "device";
    case Comm::Nccl: return "nccl";
  }
  return "?";
}

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::Allreduce: return "allreduce";
    case Strategy::ParamServer: return "ps";
    case Strategy::Model: return "model";
  }
  return "?";
}

const char* node_shared_name(NodeShared m) {
  switch (m) {
    case NodeShared::Auto: return "auto";
    case NodeShared::On: return "on";
    case NodeShared::Off: return "off";
  }
  return "?";
}

const char* fused_name(Fused f) {
  switch (f) {
    case Fused::Auto: return "auto";
    case Fused::On: return "on";
    case Fused::Off: return "off";
  }
  return "?";
}

const char* persistent_name(Persistent p) {
  switch (p) {
    case Persistent::Auto: return "auto";
    case Persistent::On: return "on";
    case Persistent::Off: return "off";
  }
  return "?";
}


const char* graphs_name(Graphs g) {
  switch (g) {
    case Graphs::Auto: return "auto";
    case Graphs::On: return "on";
    case Graphs::Off: return "off";
  }
  return "?";
}

bool graphs_in_use(const Config& cfg, bool on_simulator) {
  if (cfg.device != Device::Gpu || cfg.graph == Graphs::Off) return false;
  return cfg.graph == Graphs::On || (fused_in_use(cfg) && !on_simulator);
}

bool fused_in_use(const Config& cfg) {
  return cfg.fused != Fused::Off && cfg.device == Device::Gpu && gemm_has_fused_extras(cfg.gemm) && cfg.strategy != Strategy::Model;
}

}  // namespace nn::train
