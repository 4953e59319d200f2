// Fixture program for verify/testdata/gen.sh: what Catch2's JUnit reporter says about each outcome.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <stdexcept>

TEST_CASE("adds") {
  REQUIRE(1 + 1 == 2);
  CHECK(2 + 2 == 4);
  CHECK(3 + 3 == 6);
}

TEST_CASE("sections") {
  SECTION("first") { CHECK(true); }
  SECTION("second") { CHECK(1 == 1); }
}

// Hidden: not run unless asked for by name or tag (Catch2 2.x has no runtime skip).
TEST_CASE("slow", "[.]") { CHECK(false); }

#ifdef WITH_FAIL
TEST_CASE("divides") {
  CHECK(7 / 2 == 4);
  CHECK(6 / 2 == 3);
}
#endif

#ifdef WITH_THROW
// An exception outside any assertion.
TEST_CASE("connects") { throw std::runtime_error("cannot connect to the database"); }
#endif
