// The Run's constructor (run.h): the setup (setup.h), then what a step reads, with the step and
// the exchange engine chosen once (step.cpp, choose), then where the run stands.
#include "train/run.h"

namespace nn::train {
namespace {

template <class T, class Model>
Fixed<T, Model> make_fixed(const Config& c, Setup<T, Model>& s) {
  Fixed<T, Model> f;
  f.ranks = comm::size();
  f.rank = comm::rank();
  f.is_root = f.rank == 0;
  f.model_parallel = c.strategy == Strategy::Model;
  f.lr = static_cast<T>(c.lr);
  f.reg = static_cast<T>(c.reg);
  f.full_layout = ParamLayout{kInputDim, c.hidden, kNumClasses};
  f.n_params = s.model->num_params();
  f.batches_per_epoch = s.plan.num_batches();
  f.regions.layer1 = f.full_layout.W2();
  f.regions.layer2 = f.n_params - f.regions.layer1;
  f.split_passes = !s.graphs && !s.exact;  // --exact: a step's chunks are timed as one phase
  f.first_mark = f.split_passes || f.model_parallel ? Mark::Forward : Mark::ForwardBackward;
  choose(c, s, f);
  return f;
}

}  // namespace

template <class T, class Model>
Run<T, Model>::Run(const Config& c, const HostData& d, std::FILE* o)
    : cfg(c),
      data(d),
      out(comm::rank() == 0 ? o : nullptr),
      setup(::nn::train::setup<T, Model>(c, d)),
      evaluator(c.strategy == Strategy::Model ? setup.eval_model.get() : setup.model.get()),
      fixed(make_fixed(c, setup)),
      measured{PhaseTimer(fixed.is_root && (!c.report.empty() || c.profile), kOnHost<Model>)} {
  const TrainState& state = setup.root_plan.state;
  const Sizes& sizes = setup.root_plan.sizes;
  Progress& p = progress;
  p.start_epoch = int(state.epoch);
  p.start_batch = state.batch;
  p.restored_epochs = state.epochs.size();
  p.result.n_fit = sizes.n_fit;
  p.result.n_val = sizes.n_val;
  p.result.n_test = sizes.n_test;
  p.result.resumed = setup.root_plan.resumed;
  p.result.node_shared = setup.node_memory != nullptr;
  p.epoch_loss = state.loss_sum[std::size_t(fixed.rank)];
  p.epoch_hits = state.hits[std::size_t(fixed.rank)];
  for (std::size_t i = 0; i < p.restored_epochs; ++i) {
    const EpochRecord& e = state.epochs[i];
    p.result.epochs.push_back({int(i) + 1, e.loss, e.train_acc, e.val_acc, 0.0, 0.0});
  }
  if (p.result.resumed) p.saved_at = {p.start_epoch, p.start_batch};  // what --save holds
}

#define NN_INSTANTIATE(T, Model) template struct Run<T, Model>;
NN_FOR_EACH_RUN(NN_INSTANTIATE)
#undef NN_INSTANTIATE

}  // namespace nn::train
