//! tools.yaml `toolsets` and policy.yaml's tier defaults, as the runtime's tables.

use proc_macro2::TokenStream;
use quote::quote;

use super::paths;
use crate::model::Tool;
use crate::rules::Checked;

/// A tool's toolset as an index into `TOOLSETS` (None: the catalogue declares none).
pub fn index_of(checked: &Checked, tool: &Tool) -> Option<u8> {
    let name = tool.toolset.as_deref()?;
    let index = checked.tools.model.toolsets.iter().position(|t| t.name == name).expect("checked: declared");
    Some(u8::try_from(index).expect("checked: at most 64 toolsets"))
}

pub fn emit(checked: &Checked) -> TokenStream {
    let types = paths::toolset_types();
    let declared = &checked.tools.model.toolsets;
    let count = declared.len();
    let metas = declared.iter().map(|t| {
        let (name, title, description, core) = (&t.name, &t.title, &t.description, t.core);
        quote!(ToolsetMeta { name: #name, title: #title, description: #description, core: #core })
    });
    let tier_count = checked.policy.model.tiers.len();
    let defaults =
        toolgate_catalogue::tools_list::tier_defaults(checked).into_iter().map(|mask| quote!(Toolsets(#mask)));
    quote! {
        #[allow(unused_imports)]
        use #types::{ToolsetMeta, Toolsets};

        /// tools.yaml `toolsets`, in its order.
        pub static TOOLSETS: [ToolsetMeta; #count] = [#(#metas),*];

        /// Each tier's default toolsets (policy.yaml `tiers[].toolsets` and the core ones; every
        /// toolset when the tier names none).
        pub static TIER_TOOLSETS: [Toolsets; #tier_count] = [#(#defaults),*];
    }
}
