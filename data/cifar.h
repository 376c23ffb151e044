// The CIFAR-10 and CIFAR-100 binary format (https://www.cs.toronto.edu/~kriz/cifar.html, "binary
// version"): files of fixed-size records, nothing else.
//
//   CIFAR-10   data_batch_1.bin .. data_batch_5.bin (10,000 records each), test_batch.bin
//              record: <label byte 0..9> <3072 pixel bytes>                        3073 bytes
//   CIFAR-100  train.bin (50,000 records), test.bin
//              record: <coarse label 0..19> <fine label 0..99> <3072 pixel bytes>  3074 bytes
//
// The 3072 pixel bytes are a 32 x 32 image stored planar, red plane, green plane, blue plane, each
// row-major: exactly crema's C x H x W, so samples are {3, 32, 32} with no reordering. The sets
// are small (CIFAR-10's 60,000 images are 184 MB) and decoded into memory.
//
// Class names come from the metadata file the archives carry next to the records when it is
// there: batches.meta.txt (CIFAR-10), fine_label_names.txt / coarse_label_names.txt (CIFAR-100),
// one name per line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace crema::data {

enum class CifarVariant { cifar10, cifar100_fine, cifar100_coarse };

// The records of `files`, in order. Throws crema::Error naming the file for a missing one, a size
// that is not a whole number of records (the size, the record size and the remainder), or a label
// byte outside the variant's classes (with the record number).
std::unique_ptr<Dataset> load_cifar(const std::vector<std::string>& files, CifarVariant variant);

}  // namespace crema::data
