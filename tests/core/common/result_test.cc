#include "core/common/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace kvgate {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace result_test {

Result<int> half(int n) {
  if (n % 2 != 0) return Error(ErrorCode::kInvalidArgument, "odd: " + std::to_string(n), "n");
  return n / 2;
}

Status check(bool good) {
  if (!good) return Error(ErrorCode::kNotFound, "no such thing");
  return {};
}

Result<int> tried(bool good) {
  KVGATE_TRY(check(good));
  return 1;
}

TEST(Result, CarriesAValueOrAnError) {
  Result<int> ok = half(4);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 2);
  EXPECT_EQ(ok.code(), ErrorCode::kOk);

  Result<int> bad = half(3);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error(), "odd: 3");
  EXPECT_EQ(bad.failure().field, "n");
}

TEST(Result, AnErrorWithoutACodeIsUnknown) {
  Result<std::string> r = Error("just a message");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), ErrorCode::kUnknown);
  EXPECT_EQ(r.error(), "just a message");
  EXPECT_TRUE(r.failure().field.empty());
}

TEST(Result, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r);
  EXPECT_EQ(**r, 7);
}

TEST(Status, IsOkOrAnErrorWithItsCode) {
  Status ok = check(true);
  EXPECT_TRUE(ok);
  EXPECT_EQ(ok.code(), ErrorCode::kOk);
  EXPECT_EQ(ok.error(), "");

  Status bad = check(false);
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.code(), ErrorCode::kNotFound);
  EXPECT_EQ(bad.error(), "no such thing");

  Status plain = Error("x");
  EXPECT_FALSE(plain);
  EXPECT_EQ(plain.code(), ErrorCode::kUnknown);

  // An Error made with kOk still fails.
  Status odd = Error(ErrorCode::kOk, "y");
  EXPECT_FALSE(odd);
  EXPECT_EQ(odd.code(), ErrorCode::kUnknown);
}

TEST(Status, TryPassesTheWholeErrorOn) {
  EXPECT_EQ(*tried(true), 1);
  Result<int> r = tried(false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), ErrorCode::kNotFound);
  EXPECT_EQ(r.error(), "no such thing");
}

TEST(ErrorCode, NamesAsAbslAndGrpcDo) {
  EXPECT_EQ(code_name(ErrorCode::kOk), "OK");
  EXPECT_EQ(code_name(ErrorCode::kInvalidArgument), "INVALID_ARGUMENT");
  EXPECT_EQ(code_name(ErrorCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
  EXPECT_EQ(code_name(ErrorCode::kUnauthenticated), "UNAUTHENTICATED");
}

// google.rpc.Code's HTTP mapping.
TEST(ErrorCode, MapsToHttpStatuses) {
  EXPECT_EQ(http_status(ErrorCode::kOk), 200);
  EXPECT_EQ(http_status(ErrorCode::kCancelled), 499);
  EXPECT_EQ(http_status(ErrorCode::kUnknown), 500);
  EXPECT_EQ(http_status(ErrorCode::kInvalidArgument), 400);
  EXPECT_EQ(http_status(ErrorCode::kDeadlineExceeded), 504);
  EXPECT_EQ(http_status(ErrorCode::kNotFound), 404);
  EXPECT_EQ(http_status(ErrorCode::kPermissionDenied), 403);
  EXPECT_EQ(http_status(ErrorCode::kResourceExhausted), 429);
  EXPECT_EQ(http_status(ErrorCode::kFailedPrecondition), 400);
  EXPECT_EQ(http_status(ErrorCode::kAborted), 409);
  EXPECT_EQ(http_status(ErrorCode::kUnimplemented), 501);
  EXPECT_EQ(http_status(ErrorCode::kInternal), 500);
  EXPECT_EQ(http_status(ErrorCode::kUnavailable), 503);
  EXPECT_EQ(http_status(ErrorCode::kUnauthenticated), 401);
}

// gRPC's numbers (grpc::StatusCode).
TEST(ErrorCode, MapsToGrpcCodes) {
  EXPECT_EQ(grpc_code(ErrorCode::kOk), 0);
  EXPECT_EQ(grpc_code(ErrorCode::kCancelled), 1);
  EXPECT_EQ(grpc_code(ErrorCode::kUnknown), 2);
  EXPECT_EQ(grpc_code(ErrorCode::kInvalidArgument), 3);
  EXPECT_EQ(grpc_code(ErrorCode::kDeadlineExceeded), 4);
  EXPECT_EQ(grpc_code(ErrorCode::kNotFound), 5);
  EXPECT_EQ(grpc_code(ErrorCode::kPermissionDenied), 7);
  EXPECT_EQ(grpc_code(ErrorCode::kResourceExhausted), 8);
  EXPECT_EQ(grpc_code(ErrorCode::kFailedPrecondition), 9);
  EXPECT_EQ(grpc_code(ErrorCode::kAborted), 10);
  EXPECT_EQ(grpc_code(ErrorCode::kUnimplemented), 12);
  EXPECT_EQ(grpc_code(ErrorCode::kInternal), 13);
  EXPECT_EQ(grpc_code(ErrorCode::kUnavailable), 14);
  EXPECT_EQ(grpc_code(ErrorCode::kUnauthenticated), 16);
}

}  // namespace result_test
}  // namespace kvgate
