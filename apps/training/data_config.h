// Reading `data.train` / `data.test` into a DataLoader.
//
//   data:
//     train:
//       source: {format: image_folder, root: photos/train, channels: 3}
//       batch_size: 64
//       shuffle: true          # default: true for train, false for test
//       drop_last: true        # default: true for train, false for test
//       transform: [{random_resized_crop: 224}, horizontal_flip, {scale: 0.00392157},
//                   {normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}}]
//       workers: 2             # background threads decoding and transforming samples
//       prefetch: 4            # batches prepared ahead
//       skip_bad: false        # true: skip unreadable samples, reported once per epoch
//       reduced_decoding: true # the first transform may have JPEGs decoded at 1/2, 1/4, 1/8
//       batch_mix: {mixup_alpha: 0.2, cutmix_alpha: 1.0}   # mixup / cutmix, below
//
// batch_mix (data/batch_mix.h; timm's Mixup keys, torchvision v2's MixUp and CutMix arithmetic):
//   mixup_alpha (0: off), cutmix_alpha (0: off; at least one > 0), switch_prob (0.5: the chance
//   of cutmix when both are on), prob (1: the chance that a batch is mixed), label_smoothing (0;
//   smooths the training targets only, where the loss's label_smoothing smooths every pass's).
// Mixed targets are soft, so the net's label input must be a row of class weights,
// model.inputs.label: [K] for K classes; its loss then takes them (SoftmaxWithLoss with soft
// targets). A label input of [K] (K > 1) gives every split one-hot targets, mixed or not, so the
// test pass feeds the same input; Accuracy scores their largest class.
//
// Sources (`format:` and its keys; every source also takes `classes: [5, 7, 9]`, which keeps
// those classes and numbers them 0, 1, 2 in that order; an image folder's classes may be named):
//   idx            images, labels                     MNIST-style files, gzip or plain
//   image_folder   root, channels (3),                root/<class>/<image>, classes sorted
//                  max_image_pixels (178956970)
//   image_list     list, root (the list's folder),    "<path> <label>" lines (Caffe's ImageData)
//                  channels (3), num_classes (max + 1), max_image_pixels
//   packed         root, channels (3),                a folder `crema pack` wrote (data/packed.h)
//                  max_image_pixels
//   cifar10        files: [data_batch_1.bin, ...]     the binary version
//   cifar100       files: [train.bin], label: fine | coarse (fine)
// Relative paths (images, labels, root, list, files) are taken from the folder of the config
// file they are written in, as `_base_` is (a path in a base file from the base file's folder);
// a path given with --set from the directory crema runs in. data_path_overrides makes them
// absolute when the config is loaded, so the config.yaml a run saves reads the same data from
// anywhere. The formats are described in data/README.md.
#pragma once

#include <memory>
#include <string>

#include "apps/training/class_list.h"
#include "core/allocator.h"
#include "core/config.h"
#include "data/loader.h"

namespace crema {

// "data.train.source.root=\"/abs/photos/train\"" for each relative data path of `root` that a
// config file wrote (not a --set), resolved against that file's folder; load_run_config applies
// them.
std::vector<std::string> data_path_overrides(const ConfigNode& root);

// The dataset a `source:` map describes, before any transform. Errors carry the source's
// file:line:col.
std::shared_ptr<const data::Dataset> make_dataset(const ConfigNode& source);

// K when model.inputs.label is [K] with K > 1 (the loaders then give K-wide soft targets), else 0
// (class indices: a label of [] or [1], or a spatial one).
int64_t soft_target_classes(const ConfigNode& model);

// Builds the loader of `split` ("train" or "test"); the seed drives shuffling and augmentation.
// Batches are allocated from `batch_allocator` (null: plain host memory); a GPU run passes its
// Context's staging_allocator() so that batches are pinned and copied to the device
// asynchronously without another copy. With `classes` (the run's class list, class_list.h) the
// source is labelled by it (align_classes), errors at the source's file:line:col. With
// `target_classes` K > 0 (soft_target_classes) the batches carry K-wide targets; a batch_mix
// without them is an error at the key. `shard` {rank, count}: the part of each epoch this rank of
// a run on several processes reads (data/loader.h, shard_order).
std::unique_ptr<data::DataLoader> make_loader(const ConfigNode& data, const std::string& split,
                                              uint64_t seed, Allocator* batch_allocator = nullptr,
                                              const ClassList* classes = nullptr,
                                              int64_t target_classes = 0,
                                              std::pair<int, int> shard = {0, 1});

// A `transform:` list (data.<split>.transform) as transforms; errors at the entry's file:line:col.
std::vector<std::shared_ptr<const data::Transform>> read_transforms(const ConfigNode& list);

}  // namespace crema
