//! `ToolId` -> handler call. Rust handlers get their typed arguments; builtins need none.

use proc_macro2::TokenStream;
use quote::quote;

use super::registry::ident;
use crate::check::{Checked, Handler};

pub fn emit(checked: &Checked) -> TokenStream {
    let arms = checked.plans.iter().map(|plan| {
        let id = ident(&plan.struct_name);
        match &plan.handler {
            Handler::Echo => {
                quote!(ToolId::#id => crate::handlers::builtin::echo(ctx, arguments).await,)
            }
            Handler::Static => {
                quote!(ToolId::#id => crate::handlers::builtin::static_result(tool.meta()),)
            }
            Handler::Rust { module, function } => {
                let path = module.iter().map(|m| ident(m));
                let function = ident(function);
                quote! {
                    ToolId::#id => {
                        let args = crate::tool::typed_arguments::<args::#id>(arguments)?;
                        crate::handlers::#(#path::)*#function(ctx, args).await
                    }
                }
            }
        }
    });
    quote! {
        /// Runs the tool's handler. The gate has already checked tier, RBAC, approval and the
        /// arguments against the inputSchema before this is called.
        pub async fn dispatch(
            tool: ToolId,
            ctx: &crate::tool::ToolContext,
            arguments: serde_json::Value,
        ) -> crate::tool::ToolResult {
            match tool { #(#arms)* }
        }
    }
}
