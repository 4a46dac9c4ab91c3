"""Realistic-size benchmark, detection post-processing: YOLOv6's anchor-free head decode (640x640, 8400 anchors, 80
classes), RT-DETR's post-processor (300 queries x 80 classes), NanoDet-Plus's box decode up to its NMS (416x416, 3598
priors), the Faster R-CNN proposal layer of jwyang/faster-rcnn.pytorch up to NMS (600x1000 image, 21546 anchors) and its
proposal-target IoU matrix, and rwightman's EfficientDet top-k post-processing up to NMS (512x512, 49104 anchors x 20
VOC classes). Ported by hand from the originals for benchmarking against PyTorch eager at one thread; the network heads'
outputs are the inputs. Inputs arrive uniform in [-1, 1) (integer inputs in [0, 10)), so boxes, sizes and anchors are
made valid from them in a few commented lines at the top of each program."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# YOLOv6 (meituan/YOLOv6), yolov6/assigners/anchor_generator.py: generate_anchors, the is_eval branch
def _y6_generate_anchors(feats, fpn_strides, grid_cell_size=5.0, grid_cell_offset=0.5, device="cpu", is_eval=False,
                         mode="af"):
    anchors = []
    anchor_points = []
    stride_tensor = []
    num_anchors_list = []
    assert feats is not None
    if is_eval:
        for i, stride in enumerate(fpn_strides):
            _, _, h, w = feats[i].shape
            shift_x = torch.arange(end=w, device=device) + grid_cell_offset
            shift_y = torch.arange(end=h, device=device) + grid_cell_offset
            shift_y, shift_x = torch.meshgrid(shift_y, shift_x, indexing="ij")
            anchor_point = torch.stack(
                [shift_x, shift_y], axis=-1).to(torch.float)
            if mode == "af":  # anchor-free
                anchor_points.append(anchor_point.reshape([-1, 2]))
                stride_tensor.append(
                    torch.full(
                        (h * w, 1), stride, dtype=torch.float, device=device))
            elif mode == "ab":  # anchor-based
                anchor_points.append(anchor_point.reshape([-1, 2]).repeat(3, 1))
                stride_tensor.append(
                    torch.full(
                        (h * w, 1), stride, dtype=torch.float, device=device).repeat(3, 1))
        anchor_points = torch.cat(anchor_points)
        stride_tensor = torch.cat(stride_tensor)
        return anchor_points, stride_tensor


# YOLOv6 (meituan/YOLOv6), yolov6/utils/general.py: dist2bbox
def _y6_dist2bbox(distance, anchor_points, box_format="xyxy"):
    lt, rb = torch.split(distance, 2, -1)
    x1y1 = anchor_points - lt
    x2y2 = anchor_points + rb
    if box_format == "xyxy":
        bbox = torch.cat([x1y1, x2y2], -1)
    elif box_format == "xywh":
        c_xy = (x1y1 + x2y2) / 2
        wh = x2y2 - x1y1
        bbox = torch.cat([c_xy, wh], -1)
    return bbox


# YOLOv6 (meituan/YOLOv6), yolov6/models/effidehead.py: Detect.forward, the eval branch (not export) after the stems,
# cls/reg convs and prediction convs, whose outputs are the inputs; use_dfl True, reg_max 16 (YOLOv6-M/L), proj_conv as
# initialize_biases sets it (weight linspace(0, 16, 17) viewed [1, 17, 1, 1]); batch 2 of 640x640 images
def yolov6_detect_eval(
    cls_p3: f32[2, 80, 80, 80], cls_p4: f32[2, 80, 40, 40], cls_p5: f32[2, 80, 20, 20],
    reg_p3: f32[2, 68, 80, 80], reg_p4: f32[2, 68, 40, 40], reg_p5: f32[2, 68, 20, 20],
) -> f32[2, 8400, 85]:
    nc = 80
    nl = 3
    reg_max = 16
    use_dfl = True
    stride = torch.tensor([8, 16, 32])
    grid_cell_offset = 0.5
    grid_cell_size = 5.0
    proj = torch.linspace(0, reg_max, reg_max + 1)
    proj_conv_weight = proj.view([1, reg_max + 1, 1, 1]).clone().detach()
    x = [cls_p3, cls_p4, cls_p5]
    cls_outputs = [cls_p3, cls_p4, cls_p5]
    reg_outputs = [reg_p3, reg_p4, reg_p5]

    cls_score_list = []
    reg_dist_list = []

    for i in range(nl):
        b, _, h, w = x[i].shape
        l = h * w
        cls_output = cls_outputs[i]
        reg_output = reg_outputs[i]

        if use_dfl:
            reg_output = reg_output.reshape([-1, 4, reg_max + 1, l]).permute(0, 2, 1, 3)
            reg_output = F.conv2d(F.softmax(reg_output, dim=1), proj_conv_weight)

        cls_output = torch.sigmoid(cls_output)
        cls_score_list.append(cls_output.reshape([b, nc, l]))
        reg_dist_list.append(reg_output.reshape([b, 4, l]))

    cls_score_list = torch.cat(cls_score_list, axis=-1).permute(0, 2, 1)
    reg_dist_list = torch.cat(reg_dist_list, axis=-1).permute(0, 2, 1)

    anchor_points, stride_tensor = _y6_generate_anchors(
        x, stride, grid_cell_size, grid_cell_offset, device="cpu", is_eval=True, mode="af")

    pred_bboxes = _y6_dist2bbox(reg_dist_list, anchor_points, box_format="xywh")
    pred_bboxes *= stride_tensor
    return torch.cat(
        [
            pred_bboxes,
            torch.ones((b, pred_bboxes.shape[1], 1), dtype=pred_bboxes.dtype),
            cls_score_list
        ],
        axis=-1)


# torchvision (pytorch/vision), torchvision/ops/_box_convert.py: _box_cxcywh_to_xyxy (what box_convert calls for
# in_fmt "cxcywh", out_fmt "xyxy")
def _tv_box_cxcywh_to_xyxy(boxes):
    cx, cy, w, h = boxes.unbind(-1)
    x1 = cx - 0.5 * w
    y1 = cy - 0.5 * h
    x2 = cx + 0.5 * w
    y2 = cy + 0.5 * h
    boxes = torch.stack((x1, y1, x2, y2), dim=-1)
    return boxes


# RT-DETR (lyuwenyu/RT-DETR), rtdetr_pytorch/src/zoo/rtdetr/rtdetr_postprocessor.py: RTDETRPostProcessor.forward
# (num_classes 80, use_focal_loss True, num_top_queries 300, deploy_mode so the (labels, boxes, scores) tuple is
# returned); batch 4 of 300 decoder queries. The decoder's boxes are sigmoid outputs (made so from the raw input) and
# orig_target_sizes are integer (w, h) pixel sizes made from the raw integers
def rtdetr_postprocess(
    pred_logits: f32[4, 300, 80], raw_boxes: f32[4, 300, 4], raw_sizes: i64[4, 2]
) -> tuple[i64[4, 300], f32[4, 300, 4], f32[4, 300]]:
    boxes = (raw_boxes + 1) / 2
    orig_target_sizes = 480 + raw_sizes * 32
    num_classes = 80
    num_top_queries = 300
    logits = pred_logits

    bbox_pred = _tv_box_cxcywh_to_xyxy(boxes)
    bbox_pred *= orig_target_sizes.repeat(1, 2).unsqueeze(1)

    scores = F.sigmoid(logits)
    scores, index = torch.topk(scores.flatten(1), num_top_queries, axis=-1)
    labels = index % num_classes
    index = index // num_classes
    boxes = bbox_pred.gather(dim=1, index=index.unsqueeze(-1).repeat(1, 1, bbox_pred.shape[-1]))

    return labels, boxes, scores


# NanoDet (RangiLyu/nanodet), nanodet/model/head/gfl_head.py: Integral.forward (the newer reshape(*shape[:-1], 4, ...)
# form), with the buffer `project` = linspace(0, reg_max, reg_max + 1)
def _nd_integral(x, reg_max):
    project = torch.linspace(0, reg_max, reg_max + 1)
    shape = x.size()
    x = F.softmax(x.reshape(*shape[:-1], 4, reg_max + 1), dim=-1)
    x = F.linear(x, project.type_as(x)).reshape(*shape[:-1], 4)
    return x


# NanoDet (RangiLyu/nanodet), nanodet/util/box_transform.py: distance2bbox
def _nd_distance2bbox(points, distance, max_shape=None):
    x1 = points[..., 0] - distance[..., 0]
    y1 = points[..., 1] - distance[..., 1]
    x2 = points[..., 0] + distance[..., 2]
    y2 = points[..., 1] + distance[..., 3]
    if max_shape is not None:
        x1 = x1.clamp(min=0, max=max_shape[1])
        y1 = y1.clamp(min=0, max=max_shape[0])
        x2 = x2.clamp(min=0, max=max_shape[1])
        y2 = y2.clamp(min=0, max=max_shape[0])
    return torch.stack([x1, y1, x2, y2], -1)


# NanoDet (RangiLyu/nanodet), nanodet/model/head/nanodet_plus_head.py: NanoDetPlusHead.get_single_level_center_priors
def _nd_get_single_level_center_priors(batch_size, featmap_size, stride, dtype, device):
    h, w = featmap_size
    x_range = (torch.arange(w, dtype=dtype, device=device)) * stride
    y_range = (torch.arange(h, dtype=dtype, device=device)) * stride
    y, x = torch.meshgrid(y_range, x_range, indexing="ij")
    y = y.flatten()
    x = x.flatten()
    strides = x.new_full((x.shape[0],), stride)
    proiors = torch.stack([x, y, strides, strides], dim=-1)
    return proiors.unsqueeze(0).repeat(batch_size, 1, 1)


# NanoDet (RangiLyu/nanodet), nanodet/model/module/nms.py: multiclass_nms up to its score threshold (the masked_select
# that follows has a data-dependent shape, and batched_nms is a torchvision kernel)
def _nd_multiclass_nms_head(multi_bboxes, multi_scores, score_thr):
    num_classes = multi_scores.size(1) - 1
    # exclude background category
    if multi_bboxes.shape[1] > 4:
        bboxes = multi_bboxes.view(multi_scores.size(0), -1, 4)
    else:
        bboxes = multi_bboxes[:, None].expand(multi_scores.size(0), num_classes, 4)
    scores = multi_scores[:, :-1]

    # filter out boxes with low scores
    valid_mask = scores > score_thr
    return bboxes, scores, valid_mask


# NanoDet (RangiLyu/nanodet), nanodet/model/head/nanodet_plus_head.py: NanoDetPlusHead.post_process's split and
# get_bboxes (config nanodet-plus-m_416: 80 classes, reg_max 7, strides 8, 16, 32, 64), each image's dummy background
# column and multiclass_nms up to its threshold (score_thr 0.05); the per-image results stacked; batch 2 of 416x416
def nanodet_plus_get_bboxes(
    preds: f32[2, 3598, 112]
) -> tuple[f32[2, 3598, 80, 4], f32[2, 3598, 80], bool[2, 3598, 80]]:
    num_classes = 80
    reg_max = 7
    strides = [8, 16, 32, 64]
    cls_scores, bbox_preds = preds.split([num_classes, 4 * (reg_max + 1)], dim=-1)
    cls_preds = cls_scores
    reg_preds = bbox_preds

    b = cls_preds.shape[0]
    input_height, input_width = 416, 416
    input_shape = (input_height, input_width)

    featmap_sizes = [
        (math.ceil(input_height / stride), math.ceil(input_width) / stride)
        for stride in strides
    ]
    # get grid cells of one image
    mlvl_center_priors = [
        _nd_get_single_level_center_priors(
            b,
            featmap_sizes[i],
            stride,
            dtype=torch.float32,
            device="cpu",
        )
        for i, stride in enumerate(strides)
    ]
    center_priors = torch.cat(mlvl_center_priors, dim=1)
    dis_preds = _nd_integral(reg_preds, reg_max) * center_priors[..., 2, None]
    bboxes = _nd_distance2bbox(center_priors[..., :2], dis_preds, max_shape=input_shape)
    scores = cls_preds.sigmoid()
    out_bboxes = []
    out_scores = []
    out_masks = []
    for i in range(b):
        # add a dummy background class at the end of all labels
        # same with mmdetection2.0
        score, bbox = scores[i], bboxes[i]
        padding = score.new_zeros(score.shape[0], 1)
        score = torch.cat([score, padding], dim=1)
        results = _nd_multiclass_nms_head(bbox, score, score_thr=0.05)
        out_bboxes.append(results[0])
        out_scores.append(results[1])
        out_masks.append(results[2])
    return torch.stack(out_bboxes), torch.stack(out_scores), torch.stack(out_masks)


# faster-rcnn.pytorch (jwyang/faster-rcnn.pytorch), lib/model/rpn/bbox_transform.py: bbox_transform_inv
def _fr_bbox_transform_inv(boxes, deltas, batch_size):
    widths = boxes[:, :, 2] - boxes[:, :, 0] + 1.0
    heights = boxes[:, :, 3] - boxes[:, :, 1] + 1.0
    ctr_x = boxes[:, :, 0] + 0.5 * widths
    ctr_y = boxes[:, :, 1] + 0.5 * heights

    dx = deltas[:, :, 0::4]
    dy = deltas[:, :, 1::4]
    dw = deltas[:, :, 2::4]
    dh = deltas[:, :, 3::4]

    pred_ctr_x = dx * widths.unsqueeze(2) + ctr_x.unsqueeze(2)
    pred_ctr_y = dy * heights.unsqueeze(2) + ctr_y.unsqueeze(2)
    pred_w = torch.exp(dw) * widths.unsqueeze(2)
    pred_h = torch.exp(dh) * heights.unsqueeze(2)

    pred_boxes = deltas.clone()
    # x1
    pred_boxes[:, :, 0::4] = pred_ctr_x - 0.5 * pred_w
    # y1
    pred_boxes[:, :, 1::4] = pred_ctr_y - 0.5 * pred_h
    # x2
    pred_boxes[:, :, 2::4] = pred_ctr_x + 0.5 * pred_w
    # y2
    pred_boxes[:, :, 3::4] = pred_ctr_y + 0.5 * pred_h

    return pred_boxes


# faster-rcnn.pytorch (jwyang/faster-rcnn.pytorch), lib/model/rpn/bbox_transform.py: clip_boxes
def _fr_clip_boxes(boxes, im_shape, batch_size):

    for i in range(batch_size):
        boxes[i, :, 0::4].clamp_(0, im_shape[i, 1] - 1)
        boxes[i, :, 1::4].clamp_(0, im_shape[i, 0] - 1)
        boxes[i, :, 2::4].clamp_(0, im_shape[i, 1] - 1)
        boxes[i, :, 3::4].clamp_(0, im_shape[i, 0] - 1)

    return boxes


# faster-rcnn.pytorch (jwyang/faster-rcnn.pytorch), lib/model/rpn/proposal_layer.py: _ProposalLayer.forward up to the
# NMS call (TEST config: RPN_PRE_NMS_TOP_N 6000; feat_stride 16, ANCHOR_SCALES [8, 16, 32], ANCHOR_RATIOS [0.5, 1, 2]);
# generate_anchors' numpy result written as a tensor constant and the numpy shift grid (np.arange, np.meshgrid,
# np.vstack, ravel) as the torch equivalents (ravel written flatten); VGG16 conv5 of a 600x1000 image (38x63 cells, 9
# anchors), batch 1. The proposals and scores kept for NMS are returned; im_info (height, width, scale) is made from the
# raw input
def frcnn_proposal_layer(
    rpn_cls_prob: f32[1, 18, 38, 63], rpn_bbox_pred: f32[1, 36, 38, 63], raw_im_info: f32[1, 3]
) -> tuple[f32[1, 6000, 4], f32[1, 6000, 1]]:
    im_info = torch.stack([592 + 8 * raw_im_info[:, 0], 992 + 8 * raw_im_info[:, 1], 1.6 + 0 * raw_im_info[:, 2]], 1)
    _feat_stride = 16
    _anchors = torch.tensor([
        [-84.0, -40.0, 99.0, 55.0], [-176.0, -88.0, 191.0, 103.0], [-360.0, -184.0, 375.0, 199.0],
        [-56.0, -56.0, 71.0, 71.0], [-120.0, -120.0, 135.0, 135.0], [-248.0, -248.0, 263.0, 263.0],
        [-36.0, -80.0, 51.0, 95.0], [-80.0, -168.0, 95.0, 183.0], [-168.0, -344.0, 183.0, 359.0],
    ])
    _num_anchors = _anchors.size(0)
    pre_nms_topN = 6000

    # the first set of _num_anchors channels are bg probs
    # the second set are the fg probs
    scores = rpn_cls_prob[:, _num_anchors:, :, :]
    bbox_deltas = rpn_bbox_pred

    batch_size = bbox_deltas.size(0)

    feat_height, feat_width = scores.size(2), scores.size(3)
    shift_x = torch.arange(0, feat_width) * _feat_stride
    shift_y = torch.arange(0, feat_height) * _feat_stride
    shift_x, shift_y = torch.meshgrid(shift_x, shift_y, indexing="xy")
    shifts = torch.stack((shift_x.flatten(), shift_y.flatten(), shift_x.flatten(), shift_y.flatten()), 0).t()
    shifts = shifts.contiguous().type_as(scores).float()

    A = _num_anchors
    K = shifts.size(0)

    _anchors = _anchors.type_as(scores)
    anchors = _anchors.view(1, A, 4) + shifts.view(K, 1, 4)
    anchors = anchors.view(1, K * A, 4).expand(batch_size, K * A, 4)

    # Transpose and reshape predicted bbox transformations to get them
    # into the same order as the anchors:

    bbox_deltas = bbox_deltas.permute(0, 2, 3, 1).contiguous()
    bbox_deltas = bbox_deltas.view(batch_size, -1, 4)

    # Same story for the scores:
    scores = scores.permute(0, 2, 3, 1).contiguous()
    scores = scores.view(batch_size, -1)

    # Convert anchors into proposals via bbox transformations
    proposals = _fr_bbox_transform_inv(anchors, bbox_deltas, batch_size)

    # 2. clip predicted boxes to image
    proposals = _fr_clip_boxes(proposals, im_info, batch_size)

    scores_keep = scores
    proposals_keep = proposals
    _, order = torch.sort(scores_keep, 1, True)

    kept_proposals = []
    kept_scores = []
    for i in range(batch_size):
        proposals_single = proposals_keep[i]
        scores_single = scores_keep[i]

        order_single = order[i]

        if pre_nms_topN > 0 and pre_nms_topN < scores_keep.numel():
            order_single = order_single[:pre_nms_topN]

        proposals_single = proposals_single[order_single, :]
        scores_single = scores_single[order_single].view(-1, 1)
        kept_proposals.append(proposals_single)
        kept_scores.append(scores_single)

    return torch.stack(kept_proposals), torch.stack(kept_scores)


# faster-rcnn.pytorch (jwyang/faster-rcnn.pytorch), lib/model/rpn/bbox_transform.py: bbox_overlaps_batch
def _fr_bbox_overlaps_batch(anchors, gt_boxes):
    batch_size = gt_boxes.size(0)

    if anchors.dim() == 2:

        N = anchors.size(0)
        K = gt_boxes.size(1)

        anchors = anchors.view(1, N, 4).expand(batch_size, N, 4).contiguous()
        gt_boxes = gt_boxes[:, :, :4].contiguous()

        gt_boxes_x = (gt_boxes[:, :, 2] - gt_boxes[:, :, 0] + 1)
        gt_boxes_y = (gt_boxes[:, :, 3] - gt_boxes[:, :, 1] + 1)
        gt_boxes_area = (gt_boxes_x * gt_boxes_y).view(batch_size, 1, K)

        anchors_boxes_x = (anchors[:, :, 2] - anchors[:, :, 0] + 1)
        anchors_boxes_y = (anchors[:, :, 3] - anchors[:, :, 1] + 1)
        anchors_area = (anchors_boxes_x * anchors_boxes_y).view(batch_size, N, 1)

        gt_area_zero = (gt_boxes_x == 1) & (gt_boxes_y == 1)
        anchors_area_zero = (anchors_boxes_x == 1) & (anchors_boxes_y == 1)

        boxes = anchors.view(batch_size, N, 1, 4).expand(batch_size, N, K, 4)
        query_boxes = gt_boxes.view(batch_size, 1, K, 4).expand(batch_size, N, K, 4)

        iw = (torch.min(boxes[:, :, :, 2], query_boxes[:, :, :, 2]) -
              torch.max(boxes[:, :, :, 0], query_boxes[:, :, :, 0]) + 1)
        iw[iw < 0] = 0

        ih = (torch.min(boxes[:, :, :, 3], query_boxes[:, :, :, 3]) -
              torch.max(boxes[:, :, :, 1], query_boxes[:, :, :, 1]) + 1)
        ih[ih < 0] = 0
        ua = anchors_area + gt_boxes_area - (iw * ih)
        overlaps = iw * ih / ua

        # mask the overlap here.
        overlaps.masked_fill_(gt_area_zero.view(batch_size, 1, K).expand(batch_size, N, K), 0)
        overlaps.masked_fill_(anchors_area_zero.view(batch_size, N, 1).expand(batch_size, N, K), -1)

    elif anchors.dim() == 3:
        N = anchors.size(1)
        K = gt_boxes.size(1)

        if anchors.size(2) == 4:
            anchors = anchors[:, :, :4].contiguous()
        else:
            anchors = anchors[:, :, 1:5].contiguous()

        gt_boxes = gt_boxes[:, :, :4].contiguous()

        gt_boxes_x = (gt_boxes[:, :, 2] - gt_boxes[:, :, 0] + 1)
        gt_boxes_y = (gt_boxes[:, :, 3] - gt_boxes[:, :, 1] + 1)
        gt_boxes_area = (gt_boxes_x * gt_boxes_y).view(batch_size, 1, K)

        anchors_boxes_x = (anchors[:, :, 2] - anchors[:, :, 0] + 1)
        anchors_boxes_y = (anchors[:, :, 3] - anchors[:, :, 1] + 1)
        anchors_area = (anchors_boxes_x * anchors_boxes_y).view(batch_size, N, 1)

        gt_area_zero = (gt_boxes_x == 1) & (gt_boxes_y == 1)
        anchors_area_zero = (anchors_boxes_x == 1) & (anchors_boxes_y == 1)

        boxes = anchors.view(batch_size, N, 1, 4).expand(batch_size, N, K, 4)
        query_boxes = gt_boxes.view(batch_size, 1, K, 4).expand(batch_size, N, K, 4)

        iw = (torch.min(boxes[:, :, :, 2], query_boxes[:, :, :, 2]) -
              torch.max(boxes[:, :, :, 0], query_boxes[:, :, :, 0]) + 1)
        iw[iw < 0] = 0

        ih = (torch.min(boxes[:, :, :, 3], query_boxes[:, :, :, 3]) -
              torch.max(boxes[:, :, :, 1], query_boxes[:, :, :, 1]) + 1)
        ih[ih < 0] = 0
        ua = anchors_area + gt_boxes_area - (iw * ih)

        # Intersection (iw * ih) divided by Union (ua)
        overlaps = iw * ih / ua

        # mask the overlap here.
        overlaps.masked_fill_(gt_area_zero.view(batch_size, 1, K).expand(batch_size, N, K), 0)
        overlaps.masked_fill_(anchors_area_zero.view(batch_size, N, 1).expand(batch_size, N, K), -1)
    else:
        raise ValueError("anchors input dimension is not correct.")

    return overlaps


# faster-rcnn.pytorch (jwyang/faster-rcnn.pytorch), lib/model/rpn/proposal_target_layer_cascade.py:
# _ProposalTargetLayer.forward's gt append and _sample_rois_pytorch up to its per-image sampling (torch.nonzero of the
# fg/bg conditions and random choice, data-dependent, are left out; the two conditions are returned as masks; FG_THRESH
# 0.5, BG_THRESH_HI 0.5, BG_THRESH_LO 0.0); old PyTorch's `.index((offset,))` written as a subscript. Training batch 2,
# 2000 RPN proposals and MAX_NUM_GT_BOXES 20 ground truths per image; rois (batch index, x1, y1, x2, y2) and gt boxes
# (x1, y1, x2, y2, class) made valid in a 1000x600 image from the raw inputs
def frcnn_proposal_target_overlaps(
    raw_rois: f32[2, 2000, 5], raw_gt: f32[2, 20, 5]
) -> tuple[f32[2, 2020], i64[2, 2020], f32[2, 2020], bool[2, 2020], bool[2, 2020]]:
    rx = (raw_rois[:, :, 1] + 1) * 450
    ry = (raw_rois[:, :, 2] + 1) * 250
    all_rois = torch.stack([torch.arange(2).float().view(2, 1).expand(2, 2000), rx, ry,
                            rx + (raw_rois[:, :, 3] + 1) * 50 + 8, ry + (raw_rois[:, :, 4] + 1) * 50 + 8], 2)
    gx = (raw_gt[:, :, 0] + 1) * 450
    gy = (raw_gt[:, :, 1] + 1) * 250
    gt_boxes = torch.stack([gx, gy, gx + (raw_gt[:, :, 2] + 1) * 50 + 8, gy + (raw_gt[:, :, 3] + 1) * 50 + 8,
                            torch.floor((raw_gt[:, :, 4] + 1) * 10)], 2)
    FG_THRESH = 0.5
    BG_THRESH_HI = 0.5
    BG_THRESH_LO = 0.0

    gt_boxes_append = gt_boxes.new(gt_boxes.size()).zero_()
    gt_boxes_append[:, :, 1:5] = gt_boxes[:, :, :4]

    # Include ground-truth boxes in the set of candidate rois
    all_rois = torch.cat([all_rois, gt_boxes_append], 1)

    # overlaps: (rois x gt_boxes)

    overlaps = _fr_bbox_overlaps_batch(all_rois, gt_boxes)

    max_overlaps, gt_assignment = torch.max(overlaps, 2)

    batch_size = overlaps.size(0)
    num_proposal = overlaps.size(1)
    num_boxes_per_img = overlaps.size(2)

    offset = torch.arange(0, batch_size) * gt_boxes.size(1)
    offset = offset.view(-1, 1).type_as(gt_assignment) + gt_assignment

    labels = gt_boxes[:, :, 4].contiguous().view(-1)[offset.view(-1)].view(batch_size, -1)

    fg_mask = max_overlaps >= FG_THRESH
    bg_mask = (max_overlaps < BG_THRESH_HI) & (max_overlaps >= BG_THRESH_LO)
    return max_overlaps, gt_assignment, labels, fg_mask, bg_mask


# EfficientDet (rwightman/efficientdet-pytorch), effdet/anchors.py: decode_box_outputs
def _ed_decode_box_outputs(rel_codes, anchors, output_xyxy: bool = False):
    ycenter_a = (anchors[:, 0] + anchors[:, 2]) / 2
    xcenter_a = (anchors[:, 1] + anchors[:, 3]) / 2
    ha = anchors[:, 2] - anchors[:, 0]
    wa = anchors[:, 3] - anchors[:, 1]

    ty, tx, th, tw = rel_codes.unbind(dim=1)

    w = torch.exp(tw) * wa
    h = torch.exp(th) * ha
    ycenter = ty * ha + ycenter_a
    xcenter = tx * wa + xcenter_a
    ymin = ycenter - h / 2.
    xmin = xcenter - w / 2.
    ymax = ycenter + h / 2.
    xmax = xcenter + w / 2.
    if output_xyxy:
        out = torch.stack([xmin, ymin, xmax, ymax], dim=1)
    else:
        out = torch.stack([ymin, xmin, ymax, xmax], dim=1)
    return out


# EfficientDet (rwightman/efficientdet-pytorch), effdet/anchors.py: clip_boxes_xyxy
def _ed_clip_boxes_xyxy(boxes, size):
    boxes = boxes.clamp(min=0)
    size = torch.cat([size, size], dim=0)
    boxes = boxes.min(size)
    return boxes


# EfficientDet (rwightman/efficientdet-pytorch), effdet/bench.py: _post_process (MAX_DETECTION_POINTS 5000) and
# _batch_detection with effdet/anchors.py's generate_detections up to its batched_nms (a torchvision kernel): anchor
# gather, decode to xyxy, clip to img_size / img_scale, sigmoid scores; efficientdet_d0 trained on VOC (the repo's
# voc2007 dataset config: 512x512, levels 3 to 7, 9 anchors, 20 classes, 49104 anchors), batch 1. The anchors (Anchors' numpy grid, yxyx) are made valid from the
# raw input; img_size is a 640x480 image and img_scale comes from a raw input
def effdet_post_process(
    cls_l3: f32[1, 180, 64, 64], cls_l4: f32[1, 180, 32, 32], cls_l5: f32[1, 180, 16, 16],
    cls_l6: f32[1, 180, 8, 8], cls_l7: f32[1, 180, 4, 4],
    box_l3: f32[1, 36, 64, 64], box_l4: f32[1, 36, 32, 32], box_l5: f32[1, 36, 16, 16],
    box_l6: f32[1, 36, 8, 8], box_l7: f32[1, 36, 4, 4],
    raw_anchors: f32[49104, 4], raw_scale: f32[1],
) -> tuple[f32[1, 5000, 4], f32[1, 5000], i64[1, 5000]]:
    yc = (raw_anchors[:, 0] + 1) * 256
    xc = (raw_anchors[:, 1] + 1) * 256
    ah = (raw_anchors[:, 2] + 1) * 96 + 16
    aw = (raw_anchors[:, 3] + 1) * 96 + 16
    anchor_boxes = torch.stack([yc - ah / 2, xc - aw / 2, yc + ah / 2, xc + aw / 2], dim=1)
    img_scale = 1.25 + 0.1 * raw_scale
    img_size = torch.tensor([[640.0, 480.0]])
    num_levels = 5
    num_classes = 20
    MAX_DETECTION_POINTS = 5000
    cls_outputs = [cls_l3, cls_l4, cls_l5, cls_l6, cls_l7]
    box_outputs = [box_l3, box_l4, box_l5, box_l6, box_l7]

    batch_size = cls_outputs[0].shape[0]
    cls_outputs_all = torch.cat([
        cls_outputs[level].permute(0, 2, 3, 1).reshape([batch_size, -1, num_classes])
        for level in range(num_levels)], 1)

    box_outputs_all = torch.cat([
        box_outputs[level].permute(0, 2, 3, 1).reshape([batch_size, -1, 4])
        for level in range(num_levels)], 1)

    _, cls_topk_indices_all = torch.topk(cls_outputs_all.reshape(batch_size, -1), dim=1, k=MAX_DETECTION_POINTS)
    indices_all = cls_topk_indices_all // num_classes
    classes_all = cls_topk_indices_all % num_classes

    box_outputs_all_after_topk = torch.gather(
        box_outputs_all, 1, indices_all.unsqueeze(2).expand(-1, -1, 4))

    cls_outputs_all_after_topk = torch.gather(
        cls_outputs_all, 1, indices_all.unsqueeze(2).expand(-1, -1, num_classes))
    cls_outputs_all_after_topk = torch.gather(
        cls_outputs_all_after_topk, 2, classes_all.unsqueeze(2))

    class_out, box_out, indices, classes = (
        cls_outputs_all_after_topk, box_outputs_all_after_topk, indices_all, classes_all)
    all_boxes = []
    all_scores = []
    for i in range(batch_size):
        anchors_i = anchor_boxes[indices[i], :]
        boxes = _ed_decode_box_outputs(box_out[i].float(), anchors_i, output_xyxy=True)
        boxes = _ed_clip_boxes_xyxy(boxes, img_size[i] / img_scale[i])
        scores = class_out[i].sigmoid().squeeze(1).float()
        all_boxes.append(boxes)
        all_scores.append(scores)
    return torch.stack(all_boxes), torch.stack(all_scores), classes
