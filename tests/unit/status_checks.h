// gtest assertions on a Status: refused, with a message that holds the given words.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "pagedattn/status.h"

namespace pagedattn {

inline ::testing::AssertionResult refused_with(const Status& s, const std::string& words) {
  if (s.ok()) return ::testing::AssertionFailure() << "accepted; expected \"" << words << "\"";
  if (s.message().find(words) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "message \"" << s.message() << "\" lacks \"" << words << "\"";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace pagedattn
