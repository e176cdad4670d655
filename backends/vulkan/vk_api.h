// The Vulkan entry points Tern uses, loaded at run time from the system's loader (libvulkan.so.1,
// vulkan-1.dll, libvulkan.dylib / MoltenVK): a library built with Vulkan still loads, and runs on
// the CPU, where no Vulkan loader or driver is installed.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace tern::vk {

// Global, instance and device functions, in the order they become loadable.
#define TERN_VK_GLOBAL_FNS(X)   \
  X(vkCreateInstance)           \
  X(vkEnumerateInstanceVersion) \
  X(vkEnumerateInstanceExtensionProperties)

#define TERN_VK_INSTANCE_FNS(X)               \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)

#define TERN_VK_DEVICE_FNS(X)       \
  X(vkDestroyDevice)                \
  X(vkGetDeviceQueue)               \
  X(vkCreateBuffer)                 \
  X(vkDestroyBuffer)                \
  X(vkGetBufferMemoryRequirements)  \
  X(vkAllocateMemory)               \
  X(vkFreeMemory)                   \
  X(vkBindBufferMemory)             \
  X(vkMapMemory)                    \
  X(vkUnmapMemory)                  \
  X(vkInvalidateMappedMemoryRanges) \
  X(vkFlushMappedMemoryRanges)      \
  X(vkCreateShaderModule)           \
  X(vkDestroyShaderModule)          \
  X(vkCreateDescriptorSetLayout)    \
  X(vkDestroyDescriptorSetLayout)   \
  X(vkCreatePipelineLayout)         \
  X(vkDestroyPipelineLayout)        \
  X(vkCreatePipelineCache)          \
  X(vkDestroyPipelineCache)         \
  X(vkCreateComputePipelines)       \
  X(vkDestroyPipeline)              \
  X(vkCreateDescriptorPool)         \
  X(vkDestroyDescriptorPool)        \
  X(vkAllocateDescriptorSets)       \
  X(vkUpdateDescriptorSets)         \
  X(vkCreateCommandPool)            \
  X(vkDestroyCommandPool)           \
  X(vkResetCommandPool)             \
  X(vkAllocateCommandBuffers)       \
  X(vkBeginCommandBuffer)           \
  X(vkEndCommandBuffer)             \
  X(vkCmdBindPipeline)              \
  X(vkCmdBindDescriptorSets)        \
  X(vkCmdPushConstants)             \
  X(vkCmdDispatch)                  \
  X(vkCmdPipelineBarrier)           \
  X(vkCmdCopyBuffer)                \
  X(vkCreateFence)                  \
  X(vkDestroyFence)                 \
  X(vkResetFences)                  \
  X(vkWaitForFences)                \
  X(vkGetFenceStatus)               \
  X(vkQueueSubmit)                  \
  X(vkDeviceWaitIdle)

struct Api {
#define TERN_VK_MEMBER(f) PFN_##f f = nullptr;
  TERN_VK_GLOBAL_FNS(TERN_VK_MEMBER)
  TERN_VK_INSTANCE_FNS(TERN_VK_MEMBER)
  TERN_VK_DEVICE_FNS(TERN_VK_MEMBER)
#undef TERN_VK_MEMBER
  PFN_vkGetInstanceProcAddr get_instance_proc = nullptr;
};

// The process's function table (filled by Context as it creates the instance and device).
Api& api();
// Opens the loader once; "" on success, else why it could not be opened.
const std::string& open_loader();
// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and the like.
const char* result_name(VkResult r);

}  // namespace tern::vk
