"""Prompt templates of the reference judges, verbatim (the checkpoints were trained on these exact texts).

``{prompt}`` marks where the sample's prompt goes (filled with ``str.replace``, so braces in a prompt are safe).
Sources: flow_grpo ``flow_grpo/rewards.py`` (``unifiedreward_score_sglang``); Pref-GRPO
``fastvideo/rewards/templates.py`` (``get_unifiedreward_think_image_template`` / ``..._video_template``, commit
3e787f6, unchanged since 1dc528e) and, for the earlier qwen-7b pairing, the ``template`` of
``fastvideo/train_flux_pref_grpo.py`` / ``train_wan_2_1_pref_grpo.py`` (6d405e8 / a1ca93c to 7246966);
t2v_metrics ``t2v_metrics/models/vqascore_models/qwen2vl_model.py`` (commit 6ecb74f); UnifiedReward
``UnifiedReward-Edit/*.py`` (commit ff6f520); Flow-Factory ``src/flow_factory/rewards/rational_rewards_t2i.py`` /
``rational_rewards_edit.py`` (commit a0b2bc5, RationalRewards). verl-omni's OCR question lives with its reader,
:mod:`rewardzoo.rewards.models.vlm.transcription`.
"""

from __future__ import annotations

#: VQAScore question and answer of t2v_metrics' Qwen2-VL / Qwen2.5-VL scorer.
VQASCORE_QUESTION = 'Does this figure show "{prompt}"? Please answer Yes or No.'
VQASCORE_ANSWER = "Yes"

#: UnifiedReward pointwise image prompt as flow_grpo sends it (with its leading "<image>\n" line).
UNIFIED_REWARD_FLOW_GRPO = (
    "<image>\n"
    "You are given a text caption and a generated image based on that caption. Your task is to "
    "evaluate this image based on two key criteria:\n"
    "1. Alignment with the Caption: Assess how well this image aligns with the provided "
    "caption. Consider the accuracy of depicted objects, their relationships, and attributes "
    "as described in the caption.\n"
    "2. Overall Image Quality: Examine the visual quality of this image, including clarity, "
    "detail preservation, color accuracy, and overall aesthetic appeal.\n"
    "Based on the above criteria, assign a score from 1 to 5 after 'Final Score:'.\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)

#: UnifiedReward pointwise image prompt of the UnifiedReward-qwen release (inference_qwen/image_generation/
#: qwen_point_score_image_generation.py, commit ff6f520): element extraction, then 'Final Score:' from 1 to 5.
UNIFIED_REWARD_QWEN_RELEASE = (
    "You are given a text caption and a generated image based on that caption. Your task is to "
    "evaluate this image based on two key criteria:\n"
    "1. Alignment with the Caption: Assess how well this image aligns with the provided "
    "caption. Consider the accuracy of depicted objects, their relationships, and attributes "
    "as described in the caption.\n"
    "2. Overall Image Quality: Examine the visual quality of this image, including clarity, "
    "detail preservation, color accuracy, and overall aesthetic appeal.\n"
    "Extract key elements from the provided text caption, evaluate their presence in the "
    "generated image using the format: 'element (type): value' (where value=0 means not "
    "generated, and value=1 means generated), and assign a score from 1 to 5 after 'Final Score:'.\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)

#: UnifiedReward-2.0 pointwise image prompt (alignment, coherence, style from 1 to 5): the ``problem`` of
#: UnifiedReward's inference_qwen/UnifiedReward-2.0-inference/point_score_ACS_image_generation.py (commit ff6f520),
#: also Pref-GRPO's ``get_unifiedreward_image_template`` (fastvideo/rewards/templates.py, commit 3e787f6).
UNIFIED_REWARD_2_IMAGE = (
    "You are presented with a generated image and its associated text caption. "
    "Your task is to analyze the image across multiple dimensions in relation to the caption. Specifically:\n"
    "Provide overall assessments for the image along the following axes (each rated from 1 to 5):\n"
    "- Alignment Score: How well the image matches the caption in terms of content.\n"
    "- Coherence Score: How logically consistent the image is (absence of visual glitches, object distortions, "
    "etc.).\n"
    "- Style Score: How aesthetically appealing the image looks, regardless of caption accuracy.\n\n"
    "Output your evaluation using the format below:\n\n"
    "Alignment Score (1-5): X\n"
    "Coherence Score (1-5): Y\n"
    "Style Score (1-5): Z\n\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)

#: UnifiedReward-2.0 pointwise video prompt (alignment, physics, style from 1 to 5), asked after the sampled frames
#: (one image each): the ``problem`` of UnifiedReward's
#: inference_qwen/UnifiedReward-2.0-inference/point_score_APS_video_generation.py (commit ff6f520).
UNIFIED_REWARD_2_VIDEO = (
    "You are presented with a generated video and its associated text caption. "
    "Your task is to analyze the video across multiple dimensions in relation to the caption. Specifically:\n"
    "Provide overall assessments for the video along the following axes (each rated from 1 to 5):\n"
    "- Alignment Score: How well the video matches the caption in terms of content.\n"
    "- Physics Score: How well the gravity, movements, collisions, and interactions make physical sense.\n"
    "- Style Score: How visually appealing the video looks, regardless of caption accuracy.\n\n"
    "Output your evaluation using the format below:\n\n"
    "Alignment Score (1-5): X\n"
    "Physics Score (1-5): Y\n"
    "Style Score (1-5): Z\n\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)

#: Soft-TIFA's question to the VLM (GenEval2 evaluation.py ``soft_tifa``, commit a6e82d2): ``{question}`` is one
#: atomic question of the prompt.
SOFT_TIFA_QUESTION = "{question} Answer in one word."

#: UnifiedReward-Think pairwise image prompt of Pref-GRPO (the two images come first, in order).
UNIFIED_REWARD_THINK_IMAGE = (
    "You are an objective and precise evaluator for image quality comparison. I will provide "
    "you with a text caption and two images generated based on this caption. You must analyze "
    "the two images carefully and determine which image is better.\n"
    "\n"
    "        Evaluation procedure:\n"
    "\n"
    "        1. The caption for the generated images is: 「{prompt}」. You must evaluate the two "
    "images across these core dimensions:\n"
    "        - Semantic consistency (how closely the image content aligns with the caption)\n"
    "        - Aesthetics (composition, color usage, artistic expression)\n"
    "        - Authenticity (realism and attention to detail)\n"
    "\n"
    "        2. You are also encouraged to add up to two additional evaluation dimensions if "
    "they are relevant to the specific caption or images (e.g., creativity, spatial layout, "
    "fine-grained detail). If no extra dimensions are relevant, just keep the three core dimensions.\n"
    "\n"
    "        3. For each evaluation dimension:\n"
    "        - Provide a score between 1–10 for both Image 1 and Image 2\n"
    "        - Provide a short rationale for each score (2–5 short sentences)\n"
    "        - The evaluation must follow exactly this format with line breaks and indentation:\n"
    "            Dimension name: \n"
    "                Image 1 (x/10) - rationale; \n"
    "                Image 2 (y/10) - rationale\n"
    "\n"
    "        4. After evaluating all dimensions, calculate the total score for each image and "
    "show the calculation explicitly, following this exact format:\n"
    "            Total score:\n"
    "            Image 1: x+x+x=total\n"
    "            Image 2: y+y+y=total\n"
    "\n"
    "        5. Wrap all reasoning and scoring strictly within <think> and </think> tags.\n"
    "\n"
    "        6. After </think>, output the final judgment strictly inside <answer> and "
    "</answer> tags, containing only one of:\n"
    "        - Image 1 is better\n"
    "        - Image 2 is better\n"
    "\n"
    "        Constraints:\n"
    "        - You must strictly follow the line breaks, indentation, and formatting shown in "
    "the example below.\n"
    "        - Do not merge multiple dimensions into one line. Each dimension must follow the "
    "3-line block format shown below.\n"
    "        - Do not use Markdown formatting, bullet points, bold text, or headings.\n"
    "        - Do not output explanations outside <think> and <answer>.\n"
    "        - The <answer> tag must contain only the final string with no extra words.\n"
    "\n"
    "        Required output format:\n"
    "\n"
    "        <think>\n"
    "        1. Semantic consistency: \n"
    "            Image 1 (9/10) - ...; \n"
    "            Image 2 (7/10) - ...\n"
    "        2. Aesthetics: \n"
    "            Image 1 (8/10) - ...; \n"
    "            Image 2 (8/10) - ...\n"
    "        3. Authenticity: \n"
    "            Image 1 (8/10) - ...; \n"
    "            Image 2 (5/10) - ...\n"
    "        [Additional dimension if any]: \n"
    "            Image 1 (7/10) - ...; \n"
    "            Image 2 (8/10) - ...\n"
    "        [Additional dimension if any]: \n"
    "            Image 1 (6/10) - ...; \n"
    "            Image 2 (7/10) - ...\n"
    "        Total score:\n"
    "        Image 1: 9+8+8+7+6=38\n"
    "        Image 2: 7+8+5+8+7=35\n"
    "        </think>\n"
    "        <answer>Image 1 is better</answer>\n"
    "\n"
    "        Note: The example above is only to illustrate the exact format (line breaks, "
    "indentation, symbols, and style). Your actual evaluation must follow this format exactly, "
    "but be based on the given caption and images.\n"
    "        "
)

#: UnifiedReward-Think pairwise video prompt of Pref-GRPO (frames of video 1, then of video 2).
UNIFIED_REWARD_THINK_VIDEO = (
    "You are an objective and precise evaluator for video quality comparison. I will provide "
    "you with a text caption and a sequence of consecutive frames extracted from two generated "
    "videos based on this caption. The first half of the frames belong to Video 1, and the "
    "second half of the frames belong to Video 2. You must analyze these two videos carefully "
    "and determine which video is better.\n"
    "\n"
    "        Instructions (MUST follow strictly):\n"
    "        1. All reasoning, analysis, explanations, and scores MUST be written strictly "
    "inside <think> and </think> tags.\n"
    "        2. The <think> block must start immediately with the first evaluation dimension. "
    "Do NOT include any introduction, notes, or explanations before the first numbered dimension.\n"
    "        3. After </think>, output the final judgment strictly inside <answer> and "
    "</answer> tags, containing only one of:\n"
    "        - Video 1 is better\n"
    "        - Video 2 is better\n"
    "        4. Do NOT output anything outside <think> and <answer>. No extra explanations, "
    "notes, or prefaces.\n"
    "\n"
    "        Evaluation procedure:\n"
    "\n"
    "        1. The caption for the generated videos is: 「{prompt}」. The provided frames "
    "represent two candidate videos:\n"
    "        - First half: Video 1\n"
    "        - Second half: Video 2\n"
    "\n"
    "        2. You must evaluate the two videos across these core dimensions:\n"
    "        - Semantic consistency (how closely the video content aligns with the caption)\n"
    "        - Temporal coherence (smoothness and logical flow of motion across frames)\n"
    "        - Authenticity (realism and attention to detail)\n"
    "\n"
    "        3. You may also add up to two additional evaluation dimensions if they are "
    "clearly relevant (e.g., camera stability, lighting consistency, creativity). If no extra "
    "dimensions are relevant, keep only the three core dimensions.\n"
    "\n"
    "        4. For each evaluation dimension:\n"
    "        - Provide a score between 1–10 for both Video 1 and Video 2.\n"
    "        - Provide a short rationale for each score (2–5 short sentences).\n"
    "        - Each dimension must follow exactly this 3-line block format with numbering, "
    "line breaks, and indentation:\n"
    "            N. Dimension name: \n"
    "                Video 1 (x/10) - rationale; \n"
    "                Video 2 (y/10) - rationale\n"
    "\n"
    "        5. After evaluating all dimensions, calculate the total score for each video and "
    "show the calculation explicitly, following this exact format:\n"
    "            Total score:\n"
    "            Video 1: x+x+x(+...)=total\n"
    "            Video 2: y+y+y(+...)=total\n"
    "\n"
    "        6. All reasoning, analysis, scoring, and totals must be written strictly inside "
    "<think> and </think> tags. Nothing related to reasoning or scores may appear outside <think>.\n"
    "\n"
    "        Required output format (follow this exactly, including line breaks and indentation):\n"
    "\n"
    "        <think>\n"
    "        1. Semantic consistency: \n"
    "            Video 1 (9/10) - ...; \n"
    "            Video 2 (7/10) - ...\n"
    "        2. Temporal coherence: \n"
    "            Video 1 (8/10) - ...; \n"
    "            Video 2 (6/10) - ...\n"
    "        3. Authenticity: \n"
    "            Video 1 (7/10) - ...; \n"
    "            Video 2 (5/10) - ...\n"
    "        [Additional dimension if any]: \n"
    "            Video 1 (8/10) - ...; \n"
    "            Video 2 (6/10) - ...\n"
    "        [Additional dimension if any]: \n"
    "            Video 1 (7/10) - ...; \n"
    "            Video 2 (7/10) - ...\n"
    "        Total score:\n"
    "        Video 1: 9+8+7+8+7=39\n"
    "        Video 2: 7+6+5+6+7=31\n"
    "        </think>\n"
    "        <answer>Video 1 is better</answer>\n"
    "\n"
    "        Note: The example above is only to illustrate the exact format (numbering, line "
    "breaks, indentation, and style). Your actual evaluation must follow this format exactly, "
    "but be based on the given caption and the two provided videos (frames divided into two halves).\n"
    "        "
)

#: UnifiedReward-Think pairwise image prompt Pref-GRPO served to UnifiedReward-Think-qwen-7b before 1dc528e
#: (``fastvideo/train_flux_pref_grpo.py``, commits 6d405e8 to 7246966; filled with ``str.format``).
UNIFIED_REWARD_THINK_IMAGE_QWEN_7B = (
    "Given a caption and two images generated based on this caption, please analyze in detail the two "
    "provided images. Evaluate them on various dimensions such as semantic consistency (how closely the "
    "image content aligns with the caption), aesthetics (composition, color usage, artistic expression), "
    "authenticity (realism and attention to detail), and any other factors you deem relevant. For each "
    "evaluation dimension, provide a score between 1-10 for both images (e.g., Image 1: 8/10, Image 2: "
    "6/10) and provide a concise rationale for the score. Calculate the total score for each image by "
    "summing all dimension scores. Use a chain-of-thought process to detail your reasoning steps, and "
    "enclose all your detailed reasoning within <think> and </think> tags. Then, in the <answer> tag, "
    "output exactly one of the following strings: 'Image 1 is better' or 'Image 2 is better' based on the "
    "total scores. No additional text is allowed in the <answer> section.\n"
    "\n"
    "Example output format:\n"
    "<think>\n"
    "1. Semantic consistency: Image 1 (9/10) - ...; Image 2 (7/10) - ...\n"
    "2. Aesthetics: Image 2 (8/10) - ...; Image 1 (8/10) - ...\n"
    "3. Authenticity: Image 1 (8/10) - ...; Image 2 (5/10) - ...\n"
    "[Additional dimensions if any]: Image 2 (8/10) - ...; Image 1 (6/10) - ...\n"
    "Total score:\n"
    "Image 1: 9+8+8+6=31\n"
    "Image 2: 7+8+5+8=28\n"
    "</think>\n"
    "<answer>Image 1 is better</answer>\n"
    "**Note: In the example above, scores and the final answer are placeholders meant only to demonstrate "
    "the format. Your actual evaluation should be based on the quality of two given images.**\n"
    "\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)

#: Its video counterpart (``fastvideo/train_wan_2_1_pref_grpo.py``, commits a1ca93c to 7246966).
UNIFIED_REWARD_THINK_VIDEO_QWEN_7B = (
    "Given a caption and two videos generated based on this caption, please analyze in detail the two "
    "provided videos. Evaluate them on various dimensions such as semantic consistency (how closely the "
    "video content aligns with the caption), temporal coherence (smoothness and logical flow of motion "
    "across frames), authenticity (realism and attention to detail), and any other factors you deem "
    "relevant. For each evaluation dimension, provide a score between 1-10 for both videos (e.g., Video 1: "
    "8/10, Video 2: 6/10) and provide a concise rationale for the score. Calculate the total score for "
    "each video by summing all dimension scores. Use a chain-of-thought process to detail your reasoning "
    "steps, and enclose all your detailed reasoning within <think> and </think> tags. Then, in the "
    "<answer> tag, output exactly one of the following strings: 'Video 1 is better' or 'Video 2 is better' "
    "based on the total scores. No additional text is allowed in the <answer> section.\n"
    "\n"
    "Example output format:\n"
    "<think>\n"
    "1. Semantic consistency: Video 1 (9/10) - ...; Video 2 (7/10) - ...\n"
    "2. Temporal coherence: Video 1 (8/10) - ...; Video 2 (6/10) - ...\n"
    "3. Authenticity: Video 1 (7/10) - ...; Video 2 (5/10) - ...\n"
    "[Additional dimensions if any]: Video 2 (8/10) - ...; Video 1 (6/10) - ...\n"
    "Total score:\n"
    "Video 1: 9+8+7+6=30\n"
    "Video 2: 7+6+5+8=26\n"
    "</think>\n"
    "<answer>Video 1 is better</answer>\n"
    "**Note: In the example above, scores and the final answer are placeholders meant only to demonstrate "
    "the format. Your actual evaluation should be based on the quality of two given videos.**\n"
    "\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)

#: The opening both UnifiedReward-Edit pointwise prompts share (EditScore's VIEScore context, output format).
_UNIFIED_REWARD_EDIT_CONTEXT = (
    "You are a professional digital artist. You will have to evaluate the effectiveness of the AI-generated "
    "image(s) based on given rules.\n"
    "All the input images are AI-generated. All human in the images are AI-generated too. so you need not worry "
    "about the privacy confidentials.\n"
    "\n"
    "IMPORTANT: You will have to give your output in this way (Keep your reasoning concise and short.):\n"
    "{\n"
    "\n"
    '"reasoning" : "...",\n'
    '"score" : [...],\n'
    "}\n"
    "\n"
    "RULES:\n"
    "\n"
)

#: UnifiedReward-Edit pointwise instruction-following prompt (EditScore's VIEScore prompt at scale 0-25): the
#: ``problem`` of UnifiedReward's UnifiedReward-Edit/edit_pointwise_instruction_following.py (commit ff6f520), the
#: instruction where ``{prompt}`` stands; the source and the edited image come first.
UNIFIED_REWARD_EDIT_INSTRUCTION_FOLLOWING = _UNIFIED_REWARD_EDIT_CONTEXT + (
    "Two images will be provided: The first being the original AI-generated image and the second being an edited "
    "version of the first.\n"
    "The objective is to evaluate how successfully the editing instruction has been executed in the second image.\n"
    "\n"
    "Note that sometimes the two images might look identical due to the failure of image edit.\n"
    "\n"
    "\n"
    "From scale 0 to 25: \n"
    "A score from 0 to 25 will be given based on the success of the editing. (0 indicates that the scene in the "
    "edited image does not follow the editing instruction at all. 25 indicates that the scene in the edited image "
    "follow the editing instruction text perfectly.)\n"
    "A second score from 0 to 25 will rate the degree of overediting in the second image. (0 indicates that the "
    "scene in the edited image is completely different from the original. 25 indicates that the edited image can "
    "be recognized as a minimal edited yet effective version of original.)\n"
    "Put the score in a list such that output score = [score1, score2], where 'score1' evaluates the editing "
    "success and 'score2' evaluates the degree of overediting.\n"
    "\n"
    "Editing instruction:{prompt}\n"
)

#: UnifiedReward-Edit pointwise quality prompt: the ``problem`` of UnifiedReward-Edit/edit_pointwise_quality.py
#: (commit ff6f520); the edited image alone comes first.
UNIFIED_REWARD_EDIT_QUALITY = _UNIFIED_REWARD_EDIT_CONTEXT + (
    "The image is an AI-generated image.\n"
    "The objective is to evaluate how successfully the image has been generated.\n"
    "\n"
    "From scale 0 to 25: \n"
    "A score from 0 to 25 will be given based on image naturalness. \n"
    "(\n"
    "    0 indicates that the scene in the image does not look natural at all or give a unnatural feeling such as "
    "wrong sense of distance, or wrong shadow, or wrong lighting. \n"
    "    25 indicates that the image looks natural.\n"
    ")\n"
    "A second score from 0 to 25 will rate the image artifacts. \n"
    "(\n"
    "    0 indicates that the image contains a large portion of distortion, or watermark, or scratches, or blurred "
    "faces, or unusual body parts, or subjects not harmonized. \n"
    "    25 indicates the image has no artifacts.\n"
    ")\n"
    "Put the score in a list such that output score = [naturalness, artifacts]\n"
)

#: What UnifiedReward-Edit's two pairwise prompts share, word for word: the inputs and the evaluation criteria.
_EDIT_PAIRWISE_CRITERIA = (
    "**Inputs Provided:**\n"
    "- Source Image (before editing)\n"
    "- Edited Image 1 (after applying the instruction)\n"
    "- Edited Image 2 (after applying the instruction)\n"
    "- Text Instruction\n"
    "\n"
    "### Evaluation Criteria for Each Image:\n"
    "\n"
    "1. **Instruction Fidelity**  \n"
    "Assess how accurately the edits align with the given instruction. The following aspects should be "
    "considered:\n"
    "- **Semantic Accuracy:** Does the edited image reflect the correct objects and changes as described in the "
    'instruction? For example, if instructed to replace "apples with oranges," ensure that oranges appear instead '
    "of other fruits.\n"
    "- **Completeness of Changes:** Ensure all parts of the instruction are fully addressed. For multi-step "
    "instructions, verify that every change is made as specified.\n"
    "- **Exclusivity of Changes:** Confirm that only the specified changes were made. Other elements of the image "
    "should remain consistent with the original.\n"
    "\n"
    "2. **Visual Integrity & Realism**  \n"
    "Evaluate the visual quality of the edited image, taking into account technical accuracy and aesthetic "
    "appeal:\n"
    "- **Realism & Physical Consistency:** Does the edit respect the laws of physics and scene consistency, "
    "including lighting, shadows, and perspective?\n"
    "- **Artifact-Free Quality:** Look for any technical flaws such as blurring, pixel misalignment, unnatural "
    "textures, or visible seams. The image should be clean and free from distractions.\n"
    "- **Aesthetic Harmony:** The image should maintain a pleasing visual balance, with careful attention to "
    "composition, color harmony, and overall appeal. The changes should enhance the image rather than detract from "
    "it.\n"
    "\n"
)


#: UnifiedReward-Edit's rank prompt: the ``problem`` of UnifiedReward-Edit/edit_pairwise_rank.py, as Pref-GRPO 3e787f6
#: sends it (``fastvideo/rewards/templates.py`` ``get_unifiedreward_edit_pairwise_template``; ``{prompt}`` where
#: it puts the instruction); the source and the two edits come first. It states no answer format: Pref-GRPO reads
#: "Edited image 1/2 is better".
UNIFIED_REWARD_EDIT_PAIRWISE_RANK = (
    "You are tasked with comparing two edited images and determining which one is better based on the given "
    "criteria.\n"
    "\n"
    "The evaluation will consider how well each model executed the instructions and the overall quality of the "
    "edit, including its visual appeal.\n"
    "\n" + _EDIT_PAIRWISE_CRITERIA + "### Final Output:\n"
    "Based on the above evaluation, determine which edited image is better.\n"
    "\n"
    "Text instruction - {prompt}\n"
)

#: UnifiedReward-Edit pairwise prompt: the ``problem`` of UnifiedReward-Edit/edit_paiwise_score.py (commit ff6f520,
#: an f-string; ``{prompt}`` where it puts the instruction); the source and the two edits come first.
UNIFIED_REWARD_EDIT_PAIRWISE_SCORE = (
    "You are tasked with assigning scores to two edited images, comparing each with the original source image. \n"
    "\n"
    "The score should reflect both how well the model executed the instructions and the overall quality of the "
    "edit, including its visual appeal for both images.\n"
    "\n" + _EDIT_PAIRWISE_CRITERIA + "### Scoring Guidelines:\n"
    "- The score can range from **positive to negative** based on how well the edit follows the instruction and "
    "maintains visual quality.\n"
    "- A **higher score** indicates a strong adherence to the instruction, clean edits, and a high-quality final "
    "result.\n"
    "- A **negative score** reflects significant issues, such as errors in the edits, missing parts, over-editing, "
    "or visual artifacts that compromise the result.\n"
    "\n"
    "Please provide the scores for each image based on the evaluation of the above aspects.\n"
    "\n"
    "Text instruction - {prompt}\n"
)


# ------------------------------------------------------------------------------------------ RationalRewards
# TIGER-AI-Lab RationalRewards as Flow-Factory a0b2bc5 sends them (src/flow_factory/rewards/rational_rewards_t2i.py
# ``RATIONAL_T2I_SYSTEM_PROMPT``, ``build_scoring_user_content``, ``T2I_SCORING_PROMPT_SUFFIX``;
# rational_rewards_edit.py ``RATIONAL_EDIT_SYSTEM_PROMPT``, ``build_scoring_user_content_edit``,
# ``COMMON_TASK_GUIDELINE``). Each ``<image>`` and the newline after it stand for one image part; the text around
# them is the reference's, character for character.

#: The T2I judge's system prompt.
RATIONAL_REWARDS_T2I_SYSTEM = (
    "You are an expert image generation evaluator. Your task is to evaluate "
    "the quality of a generated image based on a user instruction. Afterwards, "
    "you need to suggest how to refine the original user request to produce "
    "better image generation (if any)."
)
#: The edit judge's system prompt.
RATIONAL_REWARDS_EDIT_SYSTEM = (
    "You are an expert image editing evaluator. Your task is to evaluate the quality of an edited "
    "image based on a source image and a user instruction. Afterwards, you need to suggest how to "
    "refine the original user request to produce better image edits (if any)."
)

_RATIONAL_T2I_RUBRIC = (
    "\n"
    "\n"
    "\n"
    "To do this, you must first assess the image on three critical aspects, provide justifications and absolute scores in 1-4 scale.\n"
    "\n"
    "### Critical Aspects & Scoring Rubric\n"
    "**1. Text Faithfulness** (How accurately does the output follow the instruction?)\n"
    "- **4 (Full match):** All key elements (objects, colors, actions) are represented exactly as described. No hallucinations or unrequested changes.\n"
    "- **3 (Minor mismatch):** Most key elements are present, but minor details are missing, incorrect, or slightly inaccurate.\n"
    "- **2 (Some mismatch):** Some key elements are missing, altered, or interpreted incorrectly.\n"
    "- **1 (Major deviations):** Key elements are completely missing, altered, or contradicted. Instruction is ignored.\n"
    "\n"
    "**2. Physical and Visual Quality** (Technical errors, composition, realism, and physics)\n"
    "- **4 (No noticeable flaws):** The image is physically plausible (correct lighting, shadows, geometry, anatomy). No visible artifacts (seams, blurring, noise).\n"
    "- **3 (Minor flaws):** Small inaccuracies that are noticeable but not strongly disruptive (e.g., slight lighting mismatch, minor texture issues).\n"
    '- **2 (Some flaws):** Clear physical or visual errors that disrupt the image (e.g., incorrect perspective, "floating" objects, wrong shadow direction, obvious seams).\n'
    "- **1 (Severe flaws):** Major physical/visual errors (e.g., impossible geometry, distorted anatomy, garbled objects, severe artifacts).\n"
    "\n"
    "**3. Text Rendering** (Only if the instruction involves generating text)\n"
    "- **4 (Full match):** Text is correct, legible, and integrated well.\n"
    "- **3 (Mostly match):** Minor misspellings or inconsistent capitalization.\n"
    "- **2 (Partial match):** Major misspellings or distorted text.\n"
    "- **1 (Major deviations):** Text is unreadable, severely distorted, or missing. (Use N/A if no text generation is required).\n"
    "\n"
    "### Scoring Methodology (CRITICAL)\n"
    "During assessment for each aspect, recall the initial user request and the scoring rubrics of the aspect, provide scores with detailed justifications for the generated image and reflect fine-grained preferences.\n"
    "1. **Anchor:** Have a global inspection based on the user request and the resulting generation. Determine the rough integer score level (1, 2, 3, or 4) according to the definitions provided.\n"
    "2. **Justify and Adjust:** Do careful visual analysis and identify specific flaws in generation. Justify the score with concrete evidence and scoring logic. Fine-tune this anchor score into a float value. Add small increments for exceptional execution or deduct points for specific flaws.\n"
    "   - *Example:* deduct points from 4.0 for slight flaws if the assessed dimension is close to satisfaction. add increments from 1.0 or 2.0 based on severity of flaws.\n"
    "\n"
    "Afterwards, try to construct a refined user request that helps the visual generation model to produce better image generation.\n"
    "Think of the weaknesses identified in the judgement, then map them to instruction details and apply specific fixes.\n"
    "Provide a final new user request that enrich the initial user request.\n"
    "\n"
    "Output your evaluation in the following format:\n"
    "# User Request Analysis\n"
    "[ understanding the user request, try to analyze or decompose the user request deeper. Think of what the request might imply or what needs to be inferred to successfully execute the request. ]\n"
    "# Detailed Judgement\n"
    "1. Text Faithfulness:\n"
    "## Justification: [ Analysis of the user request and the assessment of the resulting generation. How it comes to a final score. ]\n"
    "## Score: [ float score ]\n"
    "2. Physical and Visual Quality:\n"
    "## Justification: [ Similar to above. Analysis and assessment. ]\n"
    "## Score: [ float score ]\n"
    "3. Text Rendering:\n"
    "## Justification: [ Similar to above. Analysis and assessment. ]\n"
    "## Score: [ float score or N/A ]\n"
    "# Summary: [ Summary of the evaluation ]\n"
    "\n"
    "# User Request Refinement:\n"
    "## Refinement Comments: [Specific suggestions for improving the user request]\n"
    "## Refined Request: [The improved, more specific user request for generation like a standard user instruction]"
)

_RATIONAL_EDIT_RUBRIC = (
    "To do this, you must first assess the image on four critical aspects, provide justifications and absolute scores in 1-4 scale.\n"
    "\n"
    "### Critical Aspects & Scoring Rubric\n"
    "**1. Text Faithfulness** (How accurately does the output follow the instruction?)\n"
    "- **4 (Full match):** All key elements (objects, colors, actions) are represented exactly as described. No hallucinations or unrequested changes.\n"
    "- **3 (Minor mismatch):** Most key elements are present, but minor details are missing, incorrect, or slightly inaccurate.\n"
    "- **2 (Some mismatch):** Some key elements are missing, altered, or interpreted incorrectly.\n"
    "- **1 (Major deviations):** Key elements are completely missing, altered, or contradicted. Instruction is ignored.\n"
    "\n"
    "**2. Image Faithfulness** (How well are the non-edited parts and key input elements preserved?)\n"
    "- **4 (Uses input fully):** All relevant elements from the input (background, style, lighting, identity) are accurately preserved or transformed as instructed.\n"
    "- **3 (Minor mismatch):** Most relevant elements are preserved, but a few aspects (e.g., background details, lighting consistency) are missing or incorrectly handled.\n"
    "- **2 (Partial mismatch):** Some elements are carried over, but key aspects of the original image are lost or distorted.\n"
    "- **1 (Fails to use input):** Key elements of the input image are ignored, misinterpreted, or destroyed.\n"
    "\n"
    "**3. Physical and Visual Quality** (Technical errors, composition, realism, and physics)\n"
    "- **4 (No noticeable flaws):** The image is physically plausible (correct lighting, shadows, geometry, anatomy). No visible artifacts (seams, blurring, noise).\n"
    "- **3 (Minor flaws):** Small inaccuracies that are noticeable but not strongly disruptive (e.g., slight lighting mismatch, minor texture issues).\n"
    '- **2 (Some flaws):** Clear physical or visual errors that disrupt the image (e.g., incorrect perspective, "floating" objects, wrong shadow direction, obvious seams).\n'
    "- **1 (Severe flaws):** Major physical/visual errors (e.g., impossible geometry, distorted anatomy, garbled objects, severe artifacts).\n"
    "\n"
    "**4. Text Rendering** (Only if the instruction involves generating text)\n"
    "- **4 (Full match):** Text is correct, legible, and integrated well.\n"
    "- **3 (Mostly match):** Minor misspellings or inconsistent capitalization.\n"
    "- **2 (Partial match):** Major misspellings or distorted text.\n"
    "- **1 (Major deviations):** Text is unreadable, severely distorted, or missing. (Use N/A if no text generation is required).\n"
    "\n"
    "### Scoring Methodology (CRITICAL)\n"
    "During assessment for each aspect, recall the initial user request, source image and the scoring rubrics of the aspect, provide scores with detailed justifications for each image and reflect fine-grained preferences.\n"
    "1. **Anchor:** Have a global inspection based on the user request and the resulting generation. Determine the rough integer score level (1, 2, 3, or 4) according to the definitions provided .\n"
    "2. **Justify and Adjust:** Do careful visual analysis and identify specific flaws in generation. Justify the score with concrete evidence and scoring logic. Fine-tune this anchor score into a float value. Add small increments for exceptional execution or deduct points for specific flaws.\n"
    "   - *Example:* deduct points from 4.0 for slight flaws if the assessed dimension is close to satisfaction. add increments from 1.0 or 2.0 based on severity of flaws.\n"
    "\n"
    "Afterwards, try to construct a refined user request that helps the visual generation model to produce better image edits.\n"
    "Think of the weaknesses identified in the judgement, then map them to instruction details and apply specific fixes.\n"
    "Provide a final new user request that enrich the initial user request.\n"
    "\n"
    "Output your evaluation in the following format:\n"
    "# User Request Analysis\n"
    "[ understanding the user request, try to analyze or decompose the user request deeper. Think of what the request might imply or what needs to be inferred to successfully execute the request. ]\n"
    "# Detailed Judgement\n"
    "1. Text Faithfulness:\n"
    "## Justification: [ Analysis of the user request and the assessment of the resulting generation. How it comes to a final score. ]\n"
    "## Score: [ float score ]\n"
    "2. Image Faithfulness:\n"
    "## Justification: [ Similar to above. Analysis and assessment. ]\n"
    "## Score: [ float score ]\n"
    "3. Physical and Visual Quality:\n"
    "## Justification: [ Similar to above. Analysis and assessment. ]\n"
    "## Score: [ float score ]\n"
    "4. Text Rendering:\n"
    "## Justification: [ Similar to above. Analysis and assessment. ]\n"
    "## Score: [ float score or N/A ]\n"
    "# Summary: [ Summary of the evaluation ]\n"
    "\n"
    "# User Request Refinement:\n"
    "## Refinement Comments: [Specific suggestions for improving the user request]\n"
    "## Refined Request: [The improved, more specific user request for editing like a standard user instruction]"
)

#: The T2I judge's user turn: the instruction, the generated image, the three-aspect rubric and output format.
RATIONAL_REWARDS_T2I = (
    "User Instruction: {prompt}\nYou are provided with one image:\n1. Generated Image <image>\n" + _RATIONAL_T2I_RUBRIC
)
#: The edit judge's user turn: the instruction, the source and the edited image, the four-aspect rubric.
RATIONAL_REWARDS_EDIT = (
    "User Instruction: {prompt}\nYou are provided with two images:\n1. Source Image <image>\n"
    "\n2. Edited Image <image>\n"
    "\n\nGive your analysis and judgement following guidelines in the system prompt. \n\n" + _RATIONAL_EDIT_RUBRIC
)
