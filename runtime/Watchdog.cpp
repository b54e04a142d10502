//===- Watchdog.cpp - a deadline on every blocking wait --------------------===//

#include "runtime/Watchdog.h"

#include <algorithm>
#include <cstdio>

using namespace cleave::runtime;

Watchdog::Watchdog(double seconds, int rank, Expired expired)
    : seconds_(seconds), rank_(rank), expired_(std::move(expired)) {
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::setStep(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
}

void Watchdog::setPlace(const std::string *place) {
  std::lock_guard<std::mutex> lock(mutex_);
  place_ = place;
}

Watchdog::Wait::Wait(Watchdog *watchdog, const What &what)
    : watchdog_(watchdog) {
  if (!watchdog_)
    return;
  std::lock_guard<std::mutex> lock(watchdog_->mutex_);
  nested_ = watchdog_->depth_++ > 0;
  outer_ = watchdog_->what_;
  watchdog_->what_ = what;
  if (!nested_)
    watchdog_->since_ = std::chrono::steady_clock::now();
}

Watchdog::Wait::~Wait() {
  if (!watchdog_)
    return;
  std::lock_guard<std::mutex> lock(watchdog_->mutex_);
  --watchdog_->depth_;
  watchdog_->what_ = outer_;
}

std::string Watchdog::describe(const What &what, double waited) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return describeLocked(what, waited);
}

std::string Watchdog::describeLocked(const What &what, double waited) const {
  char head[96];
  std::snprintf(head, sizeof head,
                waited < 10 ? "rank %d waited %.1f s (--timeout %g) for "
                            : "rank %d waited %.0f s (--timeout %g) for ",
                rank_, waited, seconds_);
  std::string text = head + std::string(what.call);
  if (what.peer >= 0)
    text += std::string(what.fromPeer ? " from" : " to") + " rank " +
            std::to_string(what.peer);
  if (what.group == kWorld) {
    text += " over all ranks";
  } else if (what.group >= 0) {
    text += " over group " + std::to_string(what.group);
    if (what.ranks) {
      text += " (ranks";
      for (size_t i = 0; i < what.ranks->size(); ++i)
        text += (i ? ", " : " ") + std::to_string((*what.ranks)[i]);
      text += ")";
    }
  }
  std::string details;
  if (what.tag >= 0)
    details += "tag " + std::to_string(what.tag);
  if (what.bytes)
    details += (details.empty() ? "" : ", ") + std::to_string(what.bytes) +
               " bytes";
  if (!details.empty())
    text += " (" + details + ")";
  text += step_ >= 0 ? ", at step " + std::to_string(step_)
                     : std::string(", before the first step");
  if (place_)
    text += ", " + *place_;
  text += ": the peer stopped answering or is gone; ending the job";
  return text;
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  // A tenth of the deadline, so a wait ends at most 10% after it; at least
  // every 10 ms, at most every second.
  auto tick = std::chrono::duration<double>(
      std::clamp(seconds_ / 10, 0.01, 1.0));
  while (!stopping_) {
    wake_.wait_for(lock, tick);
    if (stopping_ || fired_ || depth_ == 0)
      continue;
    double waited = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - since_)
                        .count();
    if (waited < seconds_)
      continue;
    fired_ = true;
    std::string message = describeLocked(what_, waited);
    // The callback may end the process; it must not wait for this lock.
    lock.unlock();
    expired_(message);
    lock.lock();
  }
}
