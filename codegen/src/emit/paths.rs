//! Every runtime path the generated code names, in one place: moving a type in the server
//! means changing one line here, not hunting through quote! blocks.

use proc_macro2::TokenStream;
use quote::quote;

/// ToolMeta, Annotations, HintOverride, Catalogue.
pub fn catalogue_types() -> TokenStream {
    quote!(::toolgate_domain::catalogue)
}

/// Decision, OperationClass, Pattern, Permission, RoleGrants, TierRules.
pub fn policy_types() -> TokenStream {
    quote!(::toolgate_policy)
}

/// The context handlers receive (the domain's, with the server's services).
pub fn tool_context() -> TokenStream {
    quote!(crate::services::ToolContext)
}

pub fn tool_result() -> TokenStream {
    quote!(::toolgate_domain::ToolResult)
}

pub fn typed_arguments() -> TokenStream {
    quote!(::toolgate_domain::typed_arguments)
}

/// `src/handlers`, where Rust handlers and the builtins live.
pub fn handlers() -> TokenStream {
    quote!(crate::handlers)
}

/// ArgumentAlias, Conversion.
pub fn alias_types() -> TokenStream {
    quote!(::toolgate_domain::aliases)
}

/// EngineQuota, EngineRules.
pub fn engine_types() -> TokenStream {
    quote!(::toolgate_domain::engines)
}

/// ToolsetMeta, Toolsets.
pub fn toolset_types() -> TokenStream {
    quote!(::toolgate_domain::toolsets)
}
