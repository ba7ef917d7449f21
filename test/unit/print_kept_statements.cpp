// Prints docs/kept-statements.sql (`make kept-statements`).
#include <iostream>

#include "kept_statements_file.hpp"

int main() {
  std::cout << kept_statements_file();
  return std::cout.good() ? 0 : 1;
}
