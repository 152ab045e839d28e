// DeviceModel's copies between device and host memory for the gradient and score exchanges
// (src/train/exchange.h): the gradient copies run on a second stream after the phase events,
// so layer 2's copy and reduction overlap the dW1 GEMM. The rest of the model is in
// device_model.cpp. Tested through tests/train/test_strategies.cpp (every exchange path).
#include <cstddef>

#include "common/check.h"
#include "common/nvtx.h"
#include "model/device_model.h"

namespace nn::train {

template <class T>
void DeviceModel<T>::queue_download(T* host, std::size_t begin, std::size_t end, Stage after) {
  if (begin > end || end > grads_.size()) throw std::out_of_range("queue_download: bad range");
  const Event& ev = after == Stage::Layer2Grads ? ev_layer2_ : ev_all_;
  Event& done = after == Stage::Layer2Grads ? ev_copy_layer2_ : ev_copy_all_;
  CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.get(), ev.get(), 0));
  if (end > begin)
    CUDA_CHECK(cudaMemcpyAsync(host + begin, grads_.get() + begin, sizeof(T) * (end - begin),
                               cudaMemcpyDeviceToHost, copy_stream_.get()));
  done.record(copy_stream_.get());
}

template <class T>
bool DeviceModel<T>::download_done(Stage after) const {
  return (after == Stage::Layer2Grads ? ev_copy_layer2_ : ev_copy_all_).done();
}

template <class T>
void DeviceModel<T>::wait_download(Stage after) const {
  (after == Stage::Layer2Grads ? ev_copy_layer2_ : ev_copy_all_).sync();
}

template <class T>
void DeviceModel<T>::wait(Stage st) const {
  (st == Stage::Layer2Grads ? ev_layer2_ : st == Stage::AllGrads ? ev_all_ : ev_scores_).sync();
}

template <class T>
void DeviceModel<T>::download_scores(T* host, int b) {
  NN_RANGE("cudaMemcpyDeviceToHost");
  CUDA_CHECK(cudaMemcpyAsync(host, Z2_.get(), sizeof(T) * std::size_t(lay_.C) * b,
                             cudaMemcpyDeviceToHost, stream_.get()));
  stream_.sync();
}

template <class T>
void DeviceModel<T>::upload_scores(const T* host, int b) {
  NN_RANGE("cudaMemcpyHostToDevice");
  CUDA_CHECK(cudaMemcpyAsync(Z2_.get(), host, sizeof(T) * std::size_t(lay_.C) * b,
                             cudaMemcpyHostToDevice, stream_.get()));
}

template <class T>
void DeviceModel<T>::upload_grads(const T* host) {
  NN_RANGE("cudaMemcpyHostToDevice");
  if (grads_.size())
    CUDA_CHECK(cudaMemcpyAsync(grads_.get(), host, grads_.bytes(), cudaMemcpyHostToDevice, stream_.get()));
}

// device_model.cpp instantiates the members it defines (template class); these are the rest.
#define NN_INSTANTIATE(T) \
  template void DeviceModel<T>::queue_download(T*, std::size_t, std::size_t, Stage); \
  template bool DeviceModel<T>::download_done(Stage) const; \
  template void DeviceModel<T>::wait_download(Stage) const; \
  template void DeviceModel<T>::wait(Stage) const; \
  template void DeviceModel<T>::download_scores(T*, int); \
  template void DeviceModel<T>::upload_scores(const T*, int); \
  template void DeviceModel<T>::upload_grads(const T*);
NN_INSTANTIATE(float)
NN_INSTANTIATE(double)
#undef NN_INSTANTIATE

}  // namespace nn::train
