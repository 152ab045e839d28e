// DeviceModel's side of the gradient exchange (device_model.h): the gradient's copies to pinned
// host memory on a second stream, each after a phase's event (the overlap: layer 2's copies run
// while layer 1 is computed), the host's waits for them, and the reduced gradient's copies back
// onto the model's stream. Tested through tests/train (test_strategies) against the reference.
#include <cstddef>
#include <stdexcept>

#include "common/check.h"
#include "common/nvtx.h"
#include "model/device_model.h"

namespace nn::model {

template <class T>
int DeviceModel<T>::queue_download(T* host, std::size_t begin, std::size_t end, Stage after) {
  if (begin > end || end > grads_.size()) throw std::out_of_range("queue_download: bad range");
  const Event& ev = after == Stage::Layer2Grads ? ev_layer2_ : ev_all_;
  const int ticket = next_copy_;
  next_copy_ = (next_copy_ + 1) % kCopyTickets;
  CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.get(), ev.get(), 0));
  if (end > begin)
    CUDA_CHECK(cudaMemcpyAsync(host + begin, grads_.get() + begin, sizeof(T) * (end - begin),
                               cudaMemcpyDeviceToHost, copy_stream_.get()));
  copy_done_[std::size_t(ticket)].record(copy_stream_.get());
  return ticket;
}

template <class T>
bool DeviceModel<T>::download_done(int ticket) const {
  return copy_done_.at(std::size_t(ticket)).done();
}

template <class T>
void DeviceModel<T>::wait_download(int ticket) const {
  copy_done_.at(std::size_t(ticket)).sync();
}

template <class T>
void DeviceModel<T>::wait(Stage st) const {
  (st == Stage::Layer2Grads ? ev_layer2_ : st == Stage::AllGrads ? ev_all_ : ev_scores_).sync();
}

template <class T>
void DeviceModel<T>::upload_grads(const T* host) {
  upload_grads(host, 0, grads_.size());
}

template <class T>
void DeviceModel<T>::upload_grads(const T* host, std::size_t begin, std::size_t end) {
  NN_RANGE("cudaMemcpyHostToDevice");
  if (begin > end || end > grads_.size()) throw std::out_of_range("upload_grads: bad range");
  if (end > begin)
    CUDA_CHECK(cudaMemcpyAsync(grads_.get() + begin, host + begin, sizeof(T) * (end - begin),
                               cudaMemcpyHostToDevice, stream_.get()));
}

template <class T>
void* DeviceModel<T>::exchange_stream_after(Stage after) {
  const Event& ev = after == Stage::Layer2Grads ? ev_layer2_ : ev_all_;
  CUDA_CHECK(cudaStreamWaitEvent(exchange_stream_.get(), ev.get(), 0));
  return static_cast<void*>(exchange_stream_.get());
}

template <class T>
void DeviceModel<T>::join_exchange() {
  ev_exchanged_.record(exchange_stream_.get());
  CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), ev_exchanged_.get(), 0));
}

// device_model.cpp instantiates the class (template class); these are this file's members.
#define NN_INSTANTIATE(T) \
  template int DeviceModel<T>::queue_download(T*, std::size_t, std::size_t, Stage); \
  template bool DeviceModel<T>::download_done(int) const; \
  template void DeviceModel<T>::wait_download(int) const; \
  template void* DeviceModel<T>::exchange_stream_after(Stage); \
  template void DeviceModel<T>::join_exchange(); \
  template void DeviceModel<T>::wait(Stage) const; \
  template void DeviceModel<T>::upload_grads(const T*); \
  template void DeviceModel<T>::upload_grads(const T*, std::size_t, std::size_t); \

NN_INSTANTIATE(float)
NN_INSTANTIATE(double)
#undef NN_INSTANTIATE

}  // namespace nn::model
