#include "common/text_table.h"

#include <gtest/gtest.h>

#include <sstream>

namespace gpemu::common {
namespace {

std::string print(const TextTable& t) {
  std::ostringstream out;
  t.print(out);
  return out.str();
}

TEST(TextTable, ByContentRightAlignsNumbersOnlyAndRulesEachColumn) {
  TextTable t({"name", "value", "note"});
  t.add_row({"a", "1.5", "x"});
  t.add_row({"long name", "-12", ""});
  EXPECT_EQ(print(t),
            "name       value  note\n"
            "---------  -----  ----\n"
            "a            1.5  x\n"
            "long name    -12\n");
}

TEST(TextTable, ByColumnAlignsTheHeaderToo) {
  TextTable t({"kernel", "method", "p50"}, TextTable::Align::ByColumn, 2);
  t.add_row({"k", "m", "3"});
  t.add_row({"", "other", "12.25"});
  EXPECT_EQ(print(t),
            "kernel  method    p50\n"
            "---------------------\n"
            "k       m           3\n"
            "        other   12.25\n");
}

TEST(TextTable, ShortRowsAreFilledAndLongRowsWidenTheTable) {
  TextTable t({"a"});
  t.add_row({"x", "yy"});
  t.add_row({});
  EXPECT_EQ(print(t),
            "a\n"
            "-  --\n"
            "x  yy\n"
            "\n");
}

}  // namespace
}  // namespace gpemu::common
